import { execFile } from "node:child_process";
import { link, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { LogFixture } from "../log-fixture.js";
import { type BenchResult, ratioResult } from "../result.js";
import { settleRounds, timeSeconds } from "../timing.js";

const run = promisify(execFile);
const windowLines = 100;
const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));

/** Reads one lines window of 100 and checks it starts where it must; returns milliseconds. */
async function timeWindow(
  fx: LogFixture,
  offset: number,
  fromEnd: boolean,
  firstLine: number,
): Promise<number> {
  let rendered = "";
  const seconds = await timeSeconds(async () => {
    const w = await fx.client.readToolOutput({
      runId: fx.runId,
      handle: fx.handle,
      window: { case: "lines", value: { offset: BigInt(offset), limit: windowLines, fromEnd } },
    });
    rendered = w.rendered;
  });
  if (!rendered.includes(`\n${String(firstLine).padStart(6)}\t`)) {
    throw new Error(`window at ${offset} (fromEnd ${fromEnd}) does not start at line ${firstLine}`);
  }
  return seconds * 1000;
}

/** Puts the log in a LocalFileStore (a hard link) and prepares .venv-python; returns its root. */
async function harnessStore(fx: LogFixture): Promise<string> {
  const root = join(fx.dir, "harness-store");
  await mkdir(join(root, "bench"), { recursive: true, mode: 0o700 });
  await link(fx.log.path, join(root, "bench", "log"));
  await run("bash", [join(repoRoot, "scripts/setup-python.sh")]);
  return root;
}

/**
 * Times pydantic-ai-harness's read_tool_result on the LocalFileStore at root holding the same
 * file, in a Python process of its own, once; returns milliseconds.
 */
async function harnessWindowMs(root: string, offset: number): Promise<number> {
  const { stdout } = await run(
    join(repoRoot, ".venv-python/bin/python"),
    [
      join(repoRoot, "bench/harness-read-window.py"),
      root,
      "bench/log",
      String(offset),
      String(windowLines),
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const out = JSON.parse(stdout) as { seconds: number; lines: number; first: string };
  // Line `offset` (0-based) of the generated log carries `req=<offset>` (or `line=<offset>`).
  if (out.lines !== windowLines || !new RegExp(`(req|line)=${offset}\\b`).test(out.first)) {
    throw new Error(`harness window is not the expected one: ${stdout.slice(0, 300)}`);
  }
  return out.seconds * 1000;
}

/** deepWindowLine is the 0-based line the deep-window scenarios read at: 11M, or near the end. */
export function deepWindowLine(fx: LogFixture): number {
  return Math.min(11_000_000, Math.floor(fx.log.lines * 0.92));
}

/**
 * windowScenarios measures `deep_window_1gib` and `tail_window_1gib` (a 100-line window deep
 * in, or at the end of, the 1 GiB log, against the same window at line 0, alternating: `runs`
 * x 10 rounds of the three windows, or up to three times as many while the line-0 window's
 * times are unsettled) and `deep_window_vs_anchor` (the deep window against
 * pydantic-ai-harness's read_tool_result on the same file, alternating after one untimed read
 * of each: `runs` rounds of one of each, or up to three times as many while the harness's times
 * are unsettled; its Spillway samples are these deep windows, each right after a harness read).
 */
export async function windowScenarios(fx: LogFixture, runs: number): Promise<BenchResult[]> {
  const deep = deepWindowLine(fx);
  const reps = runs * 10;
  // Warm both paths once (connection, page cache of the index and the bytes read).
  await timeWindow(fx, 0, false, 1);
  await timeWindow(fx, deep, false, deep + 1);
  await timeWindow(fx, 0, true, fx.log.lines - windowLines + 1);
  const windows = await settleRounds(
    reps,
    async () => ({
      head: await timeWindow(fx, 0, false, 1),
      deep: await timeWindow(fx, deep, false, deep + 1),
      tail: await timeWindow(fx, 0, true, fx.log.lines - windowLines + 1),
    }),
    "head",
  );
  const root = await harnessStore(fx);
  // One untimed read first, as the windows had (the file's pages, Python's first call).
  await harnessWindowMs(root, deep);
  const anchor = await settleRounds(
    runs,
    async () => ({
      harness: await harnessWindowMs(root, deep),
      deep: await timeWindow(fx, deep, false, deep + 1),
    }),
    "harness",
  );
  const depthIndependent = {
    unit: "ms",
    baseline: "the same 100-line window at line 0, same run",
    baselineSamples: windows.head,
    ratioOf: (value: number, baseline: number) => value / baseline,
    target: "ratio <= 2",
    meets: (ratio: number) => ratio <= 2,
  };
  return [
    ratioResult({
      name: "deep_window_1gib",
      spillway: windows.deep,
      ...depthIndependent,
    }),
    ratioResult({
      name: "tail_window_1gib",
      spillway: windows.tail,
      ...depthIndependent,
    }),
    ratioResult({
      name: "deep_window_vs_anchor",
      unit: "ms",
      baseline:
        "pydantic-ai-harness 0.62.0 read_tool_result on LocalFileStore, same file, same window",
      spillway: anchor.deep,
      baselineSamples: anchor.harness,
      ratioOf: (value, baseline) => baseline / value,
      target: "ratio (harness / Spillway) >= 100",
      meets: (ratio) => ratio >= 100,
    }),
  ];
}
