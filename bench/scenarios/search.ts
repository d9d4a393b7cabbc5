import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { LogFixture } from "../log-fixture.js";
import { type BenchResult, throughputResult } from "../result.js";
import { alternate } from "../timing.js";

const run = promisify(execFile);

/** Runs `grep <flags> -c` on the log and checks it counts the rare lines. */
async function grepCount(
  fx: LogFixture,
  flag: "-F" | "-E" | "-Fi",
  pattern: string,
): Promise<void> {
  const { stdout } = await run("grep", [flag, "-c", pattern, fx.log.path], {
    env: { ...process.env, LC_ALL: "C" },
  });
  if (Number(stdout.trim()) !== fx.log.rareLines) {
    throw new Error(`grep ${flag} counted ${stdout.trim()}, expected ${fx.log.rareLines}`);
  }
}

/** Searches the whole offloaded log and checks it reports every rare line. */
async function spillwaySearch(
  fx: LogFixture,
  pattern: string,
  regex: boolean,
  ignoreCase = false,
): Promise<void> {
  const w = await fx.client.readToolOutput({
    runId: fx.runId,
    handle: fx.handle,
    window: { case: "search", value: { pattern, regex, ignoreCase, maxMatches: 100 } },
  });
  if (w.trailer?.totalMatches !== BigInt(fx.log.rareLines)) {
    throw new Error(`search found ${w.trailer?.totalMatches}, expected ${fx.log.rareLines}`);
  }
}

/**
 * Untimed searches of each kind before the timed ones. A serving replica has searched before; a
 * fresh server process takes several GiB of scanning before its code is compiled and its memory
 * settled: a literal search of the mixed log rose from about 4.5 to 8 GiB/s over its first six
 * 1 GiB searches, with 7,171 page faults in the first and 21 in the eighth.
 */
const warmSearches = 4;

/**
 * searchScenarios measures a search window over the whole of a 1 GiB log (rare matches, so
 * every byte is scanned) against `grep -F -c` and `grep -E -c` on the same file (C locale,
 * page cache warm), alternating, after warmSearches untimed searches of each kind:
 * `search_literal_<name>` and `search_regex_<name>`, with the targets given (the log's own,
 * since a log whose pattern bytes are common is harder). With `commonTextRatio`, also
 * `search_regex_common_text_<name>`: the log's expression whose text is on every line, against
 * `grep -E -c`. With `ignoreCaseRatio`, also `search_literal_ignore_case_<name>`: the literal in
 * capitals, ignoring case, against `grep -F -i -c`.
 */
export async function searchScenarios(
  fx: LogFixture,
  runs: number,
  opts: {
    name: string;
    literalRatio: number;
    regexRatio: number;
    ignoreCaseRatio?: number;
    commonTextRatio?: number;
  } = {
    name: "1gib",
    literalRatio: 0.5,
    regexRatio: 0.25,
  },
): Promise<BenchResult[]> {
  const { rareLiteral, rareRegex, bytes } = fx.log;
  /** Checks grep's count, warms the server, then alternates the two searches. */
  const measure = async (
    name: string,
    flag: "-F" | "-E" | "-Fi",
    pattern: string,
    minRatio: number,
  ): Promise<BenchResult> => {
    const regex = flag === "-E";
    const ignoreCase = flag === "-Fi";
    await grepCount(fx, flag, pattern);
    for (let k = 0; k < warmSearches; k++) await spillwaySearch(fx, pattern, regex, ignoreCase);
    const timed = await alternate(
      runs,
      () => spillwaySearch(fx, pattern, regex, ignoreCase),
      () => grepCount(fx, flag, pattern),
    );
    const grep = { "-F": "grep -F -c", "-E": "grep -E -c", "-Fi": "grep -F -i -c" }[flag];
    return throughputResult({
      name: `${name}_${opts.name}`,
      baseline: `${grep} on the same file`,
      bytes,
      ...timed,
      minRatio,
    });
  };
  const results = [
    await measure("search_literal", "-F", rareLiteral, opts.literalRatio),
    await measure("search_regex", "-E", rareRegex, opts.regexRatio),
  ];
  const { commonTextRegex } = fx.log;
  if (opts.commonTextRatio !== undefined && commonTextRegex !== undefined) {
    results.push(
      await measure("search_regex_common_text", "-E", commonTextRegex, opts.commonTextRatio),
    );
  }
  if (opts.ignoreCaseRatio !== undefined) {
    results.push(
      await measure(
        "search_literal_ignore_case",
        "-Fi",
        rareLiteral.toUpperCase(),
        opts.ignoreCaseRatio,
      ),
    );
  }
  return results;
}
