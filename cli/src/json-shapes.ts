import {
  type AttachmentJson,
  attachmentJson,
  type ListPage,
  type RunInfoJson,
  runInfoJson,
} from "@spillway/client";
import type { RunInfo } from "@spillway/proto/spillway/v1/spillway_pb.js";

type ResultAttachment = ListPage["attachments"][number];

/** OutputJson is one stored output as `ls`, `stat` and `put` print it with `--json`. */
export type OutputJson = AttachmentJson;

/** RunJson is one run as `runs --json` prints it. */
export type RunJson = RunInfoJson;

/**
 * outputJson is an output's record in snake_case like the proto's JSON names, with sizes as
 * numbers and times as ISO 8601 or null: the SDK's attachmentJson, shared with the MCP server.
 */
export const outputJson: (a: ResultAttachment) => OutputJson = attachmentJson;

/** runJson is a run's summary in the same conventions as outputJson: the SDK's runInfoJson. */
export const runJson: (r: RunInfo) => RunJson = runInfoJson;
