import { timestampDate } from "@bufbuild/protobuf/wkt";
import { JsonKind, Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import type { ListPage, RunsPage } from "./client.js";

type ResultAttachment = ListPage["attachments"][number];
type RunInfo = RunsPage["runs"][number];

/**
 * AttachmentJson is an output's record as plain JSON: the proto's snake_case names, sizes as
 * numbers, times as ISO 8601 or null, the storage tier as a word. No preview.
 */
export interface AttachmentJson {
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
  readonly stored: "inline" | "blob" | "preview_only" | "unspecified";
  readonly sha256: string;
  readonly create_time: string | null;
  readonly expire_time: string | null;
  /** Whether a `json` window can page it: `document`, `lines` (JSON Lines) or `none`. */
  readonly json_kind: "document" | "lines" | "none";
  /** Lines of its JSON view (0 without one). */
  readonly json_view_lines: number;
}

const iso = (t: RunInfo["createTime"]): string | null =>
  t === undefined ? null : timestampDate(t).toISOString();

const JSON_KINDS = {
  [JsonKind.UNSPECIFIED]: "none",
  [JsonKind.DOCUMENT]: "document",
  [JsonKind.LINES]: "lines",
} as const;

const STORED = {
  [Storage.UNSPECIFIED]: "unspecified",
  [Storage.INLINE]: "inline",
  [Storage.BLOB]: "blob",
  [Storage.PREVIEW_ONLY]: "preview_only",
} as const;

/**
 * attachmentJson is `a`'s record as AttachmentJson, for tools that print or return outputs as
 * JSON. Sizes are exact below 2^53, which no stored output reaches; an unknown storage tier
 * reads as `unspecified`.
 */
export function attachmentJson(a: ResultAttachment): AttachmentJson {
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
    stored: STORED[a.stored] ?? "unspecified",
    sha256: a.sha256,
    create_time: iso(a.createTime),
    expire_time: iso(a.expireTime),
    json_kind: JSON_KINDS[a.jsonKind] ?? "none",
    json_view_lines: Number(a.jsonViewLines),
  };
}

/** RunInfoJson is a listed run as plain JSON, in the same conventions as AttachmentJson. */
export interface RunInfoJson {
  readonly run_id: string;
  readonly output_count: number;
  readonly size_bytes: number;
  readonly create_time: string | null;
  readonly update_time: string | null;
  /** null when the run has no TTL. */
  readonly expire_time: string | null;
  /** Empty when the run is no fork. */
  readonly parent_run_id: string;
}

/**
 * runInfoJson is `run` as RunInfoJson: counts as numbers (exact below 2^53, which no run
 * reaches), times as ISO 8601 or null.
 */
export function runInfoJson(run: RunInfo): RunInfoJson {
  return {
    run_id: run.runId,
    output_count: Number(run.outputCount),
    size_bytes: Number(run.sizeBytes),
    create_time: iso(run.createTime),
    update_time: iso(run.updateTime),
    expire_time: iso(run.expireTime),
    parent_run_id: run.parentRunId,
  };
}
