import { type RunInfoJson, runInfoJson } from "@spillway/client";

/** RunSummary is what list_runs returns per run: the SDK's RunInfoJson. */
export type RunSummary = RunInfoJson;

/** summarizeRun is a listed run as list_runs returns it: the SDK's runInfoJson. */
export const summarizeRun: (run: Parameters<typeof runInfoJson>[0]) => RunSummary = runInfoJson;
