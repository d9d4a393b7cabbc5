import { median } from "./result.js";

/** timeSeconds runs fn once and returns how long it took, in seconds. */
export async function timeSeconds(fn: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/**
 * A baseline whose samples spread over more than this fraction of their median (max - min over
 * median) has not settled: the machine's other work moved it, and its median may still move.
 */
export const settledSpread = 0.3;

/** unsettled tells whether samples spread over more than settledSpread of their median. */
export function unsettled(samples: readonly number[]): boolean {
  if (samples.length < 2) return true;
  const mid = median(samples);
  return (Math.max(...samples) - Math.min(...samples)) / mid > settledSpread;
}

/**
 * alternate runs the Spillway and baseline measurements interleaved, `runs` times each, so a
 * noisy neighbour on the shared machine hurts both sides alike, and goes on with more rounds
 * while the baseline's samples are unsettled, up to `maxRuns` (three times `runs` unless set):
 * a ratio then rides a settled median, not one noisy round. One untimed round of each side
 * comes first (run 0), so neither side's timings include its warm-up (compiling its code,
 * opening its connections); the timed rounds are runs 1 and on, and every round gets its own
 * run number to name what it writes.
 */
export async function alternate(
  runs: number,
  spillway: (run: number) => Promise<unknown>,
  baseline: (run: number) => Promise<unknown>,
  maxRuns = 3 * runs,
): Promise<{ spillwaySeconds: number[]; baselineSeconds: number[] }> {
  await baseline(0);
  await spillway(0);
  const spillwaySeconds: number[] = [];
  const baselineSeconds: number[] = [];
  for (let run = 1; run <= runs || (run <= maxRuns && unsettled(baselineSeconds)); run++) {
    baselineSeconds.push(await timeSeconds(() => baseline(run)));
    spillwaySeconds.push(await timeSeconds(() => spillway(run)));
  }
  return { spillwaySeconds, baselineSeconds };
}
