/** BenchResult is one row of bench/results.json, as the performance issue specifies. */
export interface BenchResult {
  /** Scenario name, e.g. `offload_256mib_minio`. */
  readonly name: string;
  /** Spillway's median figure. */
  readonly value: number;
  /** Unit of value and baseline_value, e.g. `MiB/s`. */
  readonly unit: string;
  /** What Spillway is compared with, measured in the same run. */
  readonly baseline: string;
  /** The baseline's median figure. */
  readonly baseline_value: number;
  /** value / baseline_value for throughputs (higher is better for Spillway). */
  readonly ratio: number;
  /** The target, e.g. `ratio >= 0.8`. */
  readonly target: string;
  /** Whether ratio meets the target. */
  readonly met: boolean;
  /** Every sample, Spillway's then the baseline's, for the record. */
  readonly samples: { readonly spillway: number[]; readonly baseline: number[] };
}

/** median returns the middle of the samples (the mean of the two middle ones for even counts). */
export function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const upper = sorted[mid] ?? Number.NaN;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] ?? upper) + upper) / 2;
}

/**
 * throughputResult turns timed samples (seconds) of moving `bytes` into a MiB/s row with a
 * minimum-ratio target.
 */
export function throughputResult(opts: {
  name: string;
  baseline: string;
  bytes: number;
  spillwaySeconds: number[];
  baselineSeconds: number[];
  minRatio: number;
}): BenchResult {
  const mib = opts.bytes / (1024 * 1024);
  const spillway = opts.spillwaySeconds.map((s) => mib / s);
  const baseline = opts.baselineSeconds.map((s) => mib / s);
  const value = median(spillway);
  const baselineValue = median(baseline);
  const ratio = value / baselineValue;
  return {
    name: opts.name,
    value: round(value),
    unit: "MiB/s",
    baseline: opts.baseline,
    baseline_value: round(baselineValue),
    ratio: round(ratio, 3),
    target: `ratio >= ${opts.minRatio}`,
    met: ratio >= opts.minRatio,
    samples: { spillway: spillway.map((v) => round(v)), baseline: baseline.map((v) => round(v)) },
  };
}

function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
