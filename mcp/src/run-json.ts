import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { RunsPage } from "@spillway/client";

type RunInfo = RunsPage["runs"][number];

/** RunSummary is what list_runs returns per run, snake_case like the proto's JSON. */
export interface RunSummary {
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

const iso = (t: RunInfo["createTime"]) => (t === undefined ? null : timestampDate(t).toISOString());

/**
 * summarizeRun is a listed run with counts as numbers and times as ISO 8601 or null. Counts
 * above 2^53 lose precision, which no run reaches.
 */
export function summarizeRun(run: RunInfo): RunSummary {
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
