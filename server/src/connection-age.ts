/** The longest a Node timer waits, in milliseconds; a longer one fires at once. */
const longestTimerMs = 2 ** 31 - 1;

/**
 * connectionAgeMs is how long one connection may live under `--max-connection-age-ms`: the
 * maximum ±10 %, so connections opened together do not all close together, and never past the
 * longest timer (a maximum near it, jittered up, overflowed: Node fired the timer at once and
 * a third of the connections were closed about 100 ms after they opened).
 */
export function connectionAgeMs(maxAgeMs: number, random: () => number = Math.random): number {
  return Math.min(longestTimerMs, maxAgeMs * (0.9 + random() * 0.2));
}
