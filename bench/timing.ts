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
 * settleRounds takes `count` rounds (run 1, 2, ...), each measuring a set of named figures back
 * to back, so whatever else the shared machine does falls on all of them alike, and goes on with
 * more rounds while the samples of the `baseline` figure are unsettled, up to `maxCount` rounds
 * (three times `count` unless set). It guarantees: at least `count` rounds; never more than
 * `count` or `maxCount`, whichever is higher; and no round once the baseline's samples have
 * settled after the first `count`. It returns each figure's samples in round order, one a round.
 * Warm-up rounds are the caller's to run first.
 */
export async function settleRounds<K extends string>(
  count: number,
  round: (run: number) => Promise<Record<K, number>>,
  baseline: NoInfer<K>,
  maxCount = 3 * count,
): Promise<Record<K, number[]>> {
  if (!(count >= 1)) throw new RangeError(`settleRounds needs at least one round, not ${count}`);
  const samples: Partial<Record<K, number[]>> = {};
  for (
    let run = 1;
    run <= count || (run <= maxCount && unsettled(samples[baseline] ?? []));
    run++
  ) {
    const figures = await round(run);
    for (const key of Object.keys(figures) as K[]) {
      const list = samples[key] ?? [];
      list.push(figures[key]);
      samples[key] = list;
    }
  }
  return samples as Record<K, number[]>;
}

/**
 * alternate runs the Spillway and baseline measurements interleaved, `runs` times each, so a
 * noisy neighbour on the shared machine hurts both sides alike, and goes on with more rounds
 * while the baseline's samples are unsettled, up to `maxRuns` (three times `runs` unless set;
 * see settleRounds): a ratio then rides a settled median, not one noisy round. One untimed
 * round of each side comes first (run 0), so neither side's timings include its warm-up
 * (compiling its code, opening its connections); the timed rounds are runs 1 and on, and every
 * round gets its own run number to name what it writes.
 */
export async function alternate(
  runs: number,
  spillway: (run: number) => Promise<unknown>,
  baseline: (run: number) => Promise<unknown>,
  maxRuns = 3 * runs,
): Promise<{ spillwaySeconds: number[]; baselineSeconds: number[] }> {
  await baseline(0);
  await spillway(0);
  return settleRounds(
    runs,
    async (run) => ({
      baselineSeconds: await timeSeconds(() => baseline(run)),
      spillwaySeconds: await timeSeconds(() => spillway(run)),
    }),
    "baselineSeconds",
    maxRuns,
  );
}
