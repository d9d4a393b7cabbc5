import { type CpuSeconds, medianCpu } from "./process-cpu.js";

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
  /** The scenario's ratio: value / baseline_value, or baseline_value / value for speedups. */
  readonly ratio: number;
  /** The target, e.g. `ratio >= 0.8`. */
  readonly target: string;
  /** Whether ratio meets the target. */
  readonly met: boolean;
  /** Every sample, Spillway's then the baseline's, for the record. */
  readonly samples: { readonly spillway: number[]; readonly baseline: number[] };
  /** The lowest and highest of each side's samples, `[min, max]`. */
  readonly range: {
    readonly spillway: readonly [number, number];
    readonly baseline: readonly [number, number];
  };
  /**
   * How many timed rounds the samples come from: the scenario's count, or more when its
   * baseline's samples had not settled (bench/timing.ts settleRounds), up to three times it.
   */
  readonly rounds: number;
  /**
   * Where a timed run's time went, for scenarios that meter it: per side, the medians of its
   * elapsed seconds (`wall`) and of each process's CPU seconds (see meterCpu).
   */
  readonly cpu_seconds?: { readonly spillway: CpuSeconds; readonly baseline: CpuSeconds };
  /** Median peak resident memory (VmHWM) of each side's process, in MiB, for scenarios that meter it. */
  readonly peak_rss_mib?: { readonly spillway: number; readonly baseline: number };
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
 * minimum-ratio target (Spillway / baseline).
 */
export function throughputResult(opts: {
  name: string;
  baseline: string;
  bytes: number;
  spillwaySeconds: number[];
  baselineSeconds: number[];
  minRatio: number;
  /** Each timed run's metered CPU, per side, when the scenario meters it. */
  cpu?: { spillway: readonly CpuSeconds[]; baseline: readonly CpuSeconds[] };
}): BenchResult {
  const mib = opts.bytes / (1024 * 1024);
  const row = ratioResult({
    name: opts.name,
    unit: "MiB/s",
    baseline: opts.baseline,
    spillway: opts.spillwaySeconds.map((s) => mib / s),
    baselineSamples: opts.baselineSeconds.map((s) => mib / s),
    ratioOf: (value, baseline) => value / baseline,
    target: `ratio >= ${opts.minRatio}`,
    meets: (ratio) => ratio >= opts.minRatio,
  });
  if (opts.cpu === undefined) return row;
  return {
    ...row,
    cpu_seconds: { spillway: medianCpu(opts.cpu.spillway), baseline: medianCpu(opts.cpu.baseline) },
  };
}

/**
 * ratioResult builds a row from raw samples: medians of each side, `ratioOf` of the medians,
 * whether `meets` accepts it (given the ratio and Spillway's median), each side's range, and
 * the rounds taken: `rounds` when given, else one a baseline sample.
 */
export function ratioResult(opts: {
  name: string;
  unit: string;
  baseline: string;
  spillway: number[];
  baselineSamples: number[];
  ratioOf: (value: number, baseline: number) => number;
  target: string;
  meets: (ratio: number, value: number) => boolean;
  /** Rounds taken, where a round took other than one baseline sample. */
  rounds?: number;
}): BenchResult {
  const value = median(opts.spillway);
  const baselineValue = median(opts.baselineSamples);
  const ratio = opts.ratioOf(value, baselineValue);
  const spillway = opts.spillway.map((v) => round(v));
  const baseline = opts.baselineSamples.map((v) => round(v));
  return {
    name: opts.name,
    value: round(value),
    unit: opts.unit,
    baseline: opts.baseline,
    baseline_value: round(baselineValue),
    ratio: round(ratio, 3),
    target: opts.target,
    met: opts.meets(ratio, value),
    samples: { spillway, baseline },
    range: { spillway: sampleRange(spillway), baseline: sampleRange(baseline) },
    rounds: opts.rounds ?? baseline.length,
  };
}

/** The lowest and the highest sample. */
function sampleRange(samples: readonly number[]): [number, number] {
  return [Math.min(...samples), Math.max(...samples)];
}

function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
