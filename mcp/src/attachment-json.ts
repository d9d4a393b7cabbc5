import { type AttachmentJson, attachmentJson, type ListPage } from "@spillway/client";

type ResultAttachment = ListPage["attachments"][number];

/**
 * AttachmentSummary is what list_tool_outputs and stat_tool_output return per output: the
 * SDK's AttachmentJson (snake_case like the proto's JSON) plus the output's resource URI.
 */
export interface AttachmentSummary extends AttachmentJson {
  readonly uri: string;
}

/**
 * resourceUri is the MCP resource URI of an output: `spillway://<run>/<handle>`, each part
 * percent-encoded (a handle's own `%25`/`%5F` escapes included), so any run id round-trips
 * through parseResourceUri.
 */
export function resourceUri(runId: string, handle: string): string {
  return `spillway://${encodeURIComponent(runId)}/${encodeURIComponent(handle)}`;
}

/** parseResourceUri inverts resourceUri; undefined when `uri` is not one. */
export function parseResourceUri(uri: string): { runId: string; handle: string } | undefined {
  const m = /^spillway:\/\/([^/]+)\/([^/]+)$/.exec(uri);
  if (m === null) return undefined;
  try {
    return { runId: decodeURIComponent(m[1] ?? ""), handle: decodeURIComponent(m[2] ?? "") };
  } catch {
    return undefined;
  }
}

/**
 * summarizeAttachment is an attachment's metadata without its preview (attachmentJson: sizes as
 * numbers, times as ISO 8601 or null), plus its resource URI.
 */
export function summarizeAttachment(runId: string, a: ResultAttachment): AttachmentSummary {
  return { ...attachmentJson(a), uri: resourceUri(runId, a.handle) };
}
