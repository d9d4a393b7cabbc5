import { type AttachmentJson, attachmentJson, type ListPage } from "@spillway/client";
import type { RunInfo } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { isoTime } from "./format.js";

type ResultAttachment = ListPage["attachments"][number];

/** OutputJson is one stored output as `ls`, `stat` and `put` print it with `--json`. */
export type OutputJson = AttachmentJson;

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

/**
 * outputJson is an output's record in snake_case like the proto's JSON names, with sizes as
 * numbers and times as ISO 8601 or null: the SDK's attachmentJson, shared with the MCP server.
 */
export const outputJson: (a: ResultAttachment) => OutputJson = attachmentJson;

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
