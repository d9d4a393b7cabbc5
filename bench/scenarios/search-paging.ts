import type { SearchCursor } from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { LogFixture } from "../log-fixture.js";
import { type BenchResult, ratioResult } from "../result.js";
import { alternate } from "../timing.js";

/** A literal on one line in 89 of the log: ~8,400 matches in 64 MiB, ~84 pages. */
const pattern = "ms=88";

/**
 * Pages through every match of `pattern`, each page resuming at the last one's cursor, or by
 * skip alone (each page then rescans the log from its first byte); returns the match count.
 */
async function pageAll(fx: LogFixture, byCursor: boolean): Promise<number> {
  let skip = 0n;
  let after: SearchCursor | undefined;
  let matches = 0n;
  for (;;) {
    const w = await fx.client.readToolOutput({
      runId: fx.runId,
      handle: fx.handle,
      window: { case: "search", value: { pattern, skip, after: byCursor ? after : undefined } },
    });
    matches += w.trailer?.returnedMatches ?? 0n;
    const next = w.trailer?.nextOffset;
    if (next === undefined) return Number(matches);
    skip = next;
    after = w.trailer?.searchCursor;
  }
}

/**
 * searchPagingScenario measures `search_paging_64mib`: reading every match of a common
 * literal in a 64 MiB log, 100 per page, each page resuming at the last one's cursor (one pass
 * over the log), against the same pages asked by skip alone (one pass per page). The ratio is
 * the speed-up: the skip paging's time over the cursor paging's.
 */
export async function searchPagingScenario(fx: LogFixture, runs: number): Promise<BenchResult> {
  const expected = Math.floor(fx.log.lines / 89);
  const found = await pageAll(fx, true);
  if (Math.abs(found - expected) > fx.log.rareLines + 1 || (await pageAll(fx, false)) !== found) {
    throw new Error(`paging found ${found} matches, expected about ${expected}`);
  }
  const timed = await alternate(
    runs,
    () => pageAll(fx, true),
    () => pageAll(fx, false),
  );
  return ratioResult({
    name: "search_paging_64mib",
    unit: "s",
    baseline: `the same ${Math.ceil(found / 100)} pages (${found} matches) by skip alone`,
    spillway: timed.spillwaySeconds,
    baselineSamples: timed.baselineSeconds,
    ratioOf: (value, baseline) => baseline / value,
    target: "ratio >= 2",
    meets: (ratio) => ratio >= 2,
  });
}
