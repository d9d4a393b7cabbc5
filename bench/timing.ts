/** timeSeconds runs fn once and returns how long it took, in seconds. */
export async function timeSeconds(fn: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/**
 * alternate runs the Spillway and baseline measurements interleaved, `runs` times each, so a
 * noisy neighbour on the shared machine hurts both sides alike. One untimed round of each side
 * comes first (run 0), so neither side's timings include its warm-up (compiling its code,
 * opening its connections); the timed rounds are runs 1 to `runs`, and every round gets its own
 * run number to name what it writes.
 */
export async function alternate(
  runs: number,
  spillway: (run: number) => Promise<unknown>,
  baseline: (run: number) => Promise<unknown>,
): Promise<{ spillwaySeconds: number[]; baselineSeconds: number[] }> {
  await baseline(0);
  await spillway(0);
  const spillwaySeconds: number[] = [];
  const baselineSeconds: number[] = [];
  for (let run = 1; run <= runs; run++) {
    baselineSeconds.push(await timeSeconds(() => baseline(run)));
    spillwaySeconds.push(await timeSeconds(() => spillway(run)));
  }
  return { spillwaySeconds, baselineSeconds };
}
