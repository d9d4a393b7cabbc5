import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ListPage } from "@spillway/client";

type ResultAttachment = ListPage["attachments"][number];

/** AttachmentSummary is what list_tool_outputs and stat_tool_output return per output, snake_case like the proto's JSON. */
export interface AttachmentSummary {
  readonly handle: string;
  readonly name: string;
  readonly slot: string;
  readonly content_type: string;
  readonly size_bytes: number;
  readonly observed_bytes: number;
  readonly line_count: number;
  readonly binary: boolean;
  readonly truncated: boolean;
  readonly readable: boolean;
  readonly sha256: string;
  readonly create_time: string | null;
  readonly expire_time: string | null;
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
 * summarizeAttachment is an attachment's metadata without its preview (sizes as numbers,
 * times as ISO 8601 or null), plus its resource URI. Sizes above 2^53 lose precision, which
 * no stored output reaches.
 */
export function summarizeAttachment(runId: string, a: ResultAttachment): AttachmentSummary {
  return {
    handle: a.handle,
    name: a.name,
    slot: a.slot,
    content_type: a.contentType,
    size_bytes: Number(a.sizeBytes),
    observed_bytes: Number(a.observedBytes),
    line_count: Number(a.lineCount),
    binary: a.binary,
    truncated: a.truncated,
    readable: a.readable,
    sha256: a.sha256,
    create_time: a.createTime === undefined ? null : timestampDate(a.createTime).toISOString(),
    expire_time: a.expireTime === undefined ? null : timestampDate(a.expireTime).toISOString(),
    uri: resourceUri(runId, a.handle),
  };
}
