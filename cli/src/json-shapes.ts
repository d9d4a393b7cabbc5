import type { ListPage } from "@spillway/client";
import type { RunInfo } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import { isoTime } from "./format.js";

type ResultAttachment = ListPage["attachments"][number];

/** OutputJson is one stored output as `ls`, `stat` and `put` print it with `--json`. */
export interface OutputJson {
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
}

/** RunJson is one run as `runs --json` prints it. */
export interface RunJson {
  readonly run_id: string;
  readonly output_count: number;
  readonly size_bytes: number;
  readonly create_time: string | null;
  readonly update_time: string | null;
  readonly expire_time: string | null;
  readonly parent_run_id: string;
}

const STORED = {
  [Storage.UNSPECIFIED]: "unspecified",
  [Storage.INLINE]: "inline",
  [Storage.BLOB]: "blob",
  [Storage.PREVIEW_ONLY]: "preview_only",
} as const;

/**
 * outputJson is an output's record in snake_case like the proto's JSON names, with sizes as
 * numbers (exact below 2^53, which no stored output reaches) and times as ISO 8601 or null.
 */
export function outputJson(a: ResultAttachment): OutputJson {
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
    create_time: isoTime(a.createTime),
    expire_time: isoTime(a.expireTime),
  };
}

/** runJson is a run's summary in the same conventions as outputJson. */
export function runJson(r: RunInfo): RunJson {
  return {
    run_id: r.runId,
    output_count: Number(r.outputCount),
    size_bytes: Number(r.sizeBytes),
    create_time: isoTime(r.createTime),
    update_time: isoTime(r.updateTime),
    expire_time: isoTime(r.expireTime),
    parent_run_id: r.parentRunId,
  };
}
