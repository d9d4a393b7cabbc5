import type { TopLevelSpec } from "vega-lite";
import type { BenchResult } from "./result.js";

/** BenchChart is one chart of the benchmark results: the file it is written to and its spec. */
export interface BenchChart {
  /** File name under the charts directory, e.g. `bench-transfers.svg`. */
  readonly file: string;
  /** The chart's title, also the image's alt text in docs/benchmarks.md. */
  readonly title: string;
  /** The Vega-Lite spec, data inline. */
  readonly spec: TopLevelSpec;
}

/** A group of scenarios measured in the same unit, drawn on one value axis. */
interface ValueGroup {
  readonly id: string;
  readonly title: string;
  readonly axis: string;
  readonly scenarios: readonly string[];
  /** A log axis, for groups whose two sides differ by orders of magnitude. */
  readonly log?: boolean;
}

/**
 * The scenarios drawn together: each group shares a unit and a direction (higher or lower is
 * better). A scenario no group names gets a chart of its own, so a new scenario is never left out.
 */
const valueGroups: readonly ValueGroup[] = [
  {
    id: "transfers",
    title: "256 MiB transfers",
    axis: "MiB/s (higher is better)",
    scenarios: ["offload_256mib_fs", "read_full_256mib_fs", "offload_256mib_minio"],
  },
  {
    id: "offload-concurrent",
    title: "16 offloads of 64 MiB at once",
    axis: "MiB/s (higher is better)",
    scenarios: ["offload_concurrent_16", "offload_concurrent_16_one_worker"],
  },
  {
    id: "cli-cat",
    title: "spillway-cli cat of a 1 GiB output into a pipe",
    axis: "MiB/s (higher is better)",
    scenarios: ["cli_cat_disk_1gib", "cli_cat_count_1gib", "cli_cat_1gib"],
  },
  {
    id: "small-offloads",
    title: "10,000 offloads of 4 KiB, 32 in flight",
    axis: "offloads/s (higher is better)",
    scenarios: ["small_offloads", "small_offloads_one_worker"],
  },
  {
    id: "per-record",
    title: "Cost per record: replayed offload, DeleteRun, sweep",
    axis: "µs per record (lower is better)",
    scenarios: ["replay_offloads", "delete_run_10k", "sweep_per_record"],
  },
  {
    id: "windows",
    title: "A 100-line window of a 1 GiB, 11.8 M-line log",
    axis: "ms per window, log scale (lower is better)",
    scenarios: ["deep_window_1gib", "tail_window_1gib", "deep_window_vs_anchor"],
    log: true,
  },
  {
    id: "call-floor",
    title: "Per-call cost against a bare HTTP/2 round trip",
    axis: "µs per call, median of batches (lower is better)",
    scenarios: [
      "call_floor",
      "deep_window_vs_floor",
      "call_floor_python",
      "deep_window_vs_floor_python",
    ],
  },
  {
    id: "search",
    title: "Search over the whole of a 1 GiB log: the rare-byte log and the mixed one",
    axis: "MiB/s scanned (higher is better)",
    scenarios: [
      "search_literal_1gib",
      "search_regex_1gib",
      "search_literal_mixed_1gib",
      "search_regex_mixed_1gib",
      "search_regex_common_text_mixed_1gib",
      "search_literal_ignore_case_mixed_1gib",
    ],
  },
  {
    id: "search-paging",
    title: "Every match of a 64 MiB log, 85 pages of 100",
    axis: "seconds for all pages (lower is better)",
    scenarios: ["search_paging_64mib"],
  },
  {
    id: "busy-tenant",
    title: "One tenant's calls while another keeps its own in flight",
    axis: "ms per call, log scale (lower is better)",
    scenarios: ["search_beside_busy_tenant_256mib", "window_beside_busy_jsonpath_32mib"],
    log: true,
  },
  {
    id: "memory",
    title: "Peak RSS of a replica under load",
    axis: "MiB (lower is better)",
    scenarios: ["memory_under_load"],
  },
];

const spillway = "Spillway";
const baseline = "baseline (same run)";
const sides = [spillway, baseline];
const sideColors = ["#1f77b4", "#ff7f0e"];
const width = 480;
const font = "Helvetica, Arial, sans-serif";

/** Shared look: one font, no chart border, readable sizes. */
const config = {
  font,
  view: { stroke: null },
  title: { fontSize: 15, subtitleFontSize: 12, subtitleColor: "#555", anchor: "start" as const },
  axis: { labelFontSize: 12, titleFontSize: 12 },
  legend: { labelFontSize: 12, titleFontSize: 12, labelLimit: 320, orient: "bottom" as const },
};

/** The category axis down a chart's side: one row per value of `field`, in `sort`'s order. */
function rowAxis(field: string, sort: string[], labelLimit = 320) {
  return {
    field,
    type: "nominal" as const,
    sort,
    title: null,
    axis: { labelFontSize: 12, labelLimit },
  };
}

/** What every chart's spec starts with: the schema, its title and subtitle, and the shared look. */
function specHead(text: string, subtitle: string, chartWidth = width) {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text, subtitle },
    width: chartWidth,
    config,
  };
}

/**
 * benchCharts turns bench/results.json's rows into Vega-Lite specs: one chart of medians,
 * ranges and samples per group of scenarios sharing a unit, one of every scenario's ratio
 * against its target, and one of where the 256 MiB transfers' CPU went.
 *
 * Guarantees: every row appears in exactly one value chart; the specs hold only the rows'
 * figures (no dates, no randomness), so the same rows give the same specs.
 */
export function benchCharts(results: readonly BenchResult[]): BenchChart[] {
  const charts: BenchChart[] = [ratioChart(results)];
  const named = new Set(valueGroups.flatMap((g) => g.scenarios));
  const groups = [
    ...valueGroups,
    ...results
      .filter((r) => !named.has(r.name))
      .map((r) => ({
        id: r.name.replaceAll("_", "-"),
        title: r.name,
        axis: r.unit,
        scenarios: [r.name],
      })),
  ];
  for (const group of groups) {
    const rows = results.filter((r) => group.scenarios.includes(r.name));
    if (rows.length > 0) charts.push(valueChart(group, rows));
  }
  const metered = results.filter((r) => r.cpu_seconds !== undefined);
  if (metered.length > 0) charts.push(cpuChart(metered));
  return charts;
}

/** Samples as dots, the range over runs as a line, the median as a tick, per side. */
function valueChart(group: ValueGroup, rows: readonly BenchResult[]): BenchChart {
  const samples = rows.flatMap((r) => [
    ...r.samples.spillway.map((value) => ({ scenario: r.name, side: spillway, value })),
    ...r.samples.baseline.map((value) => ({ scenario: r.name, side: baseline, value })),
  ]);
  const medians = rows.flatMap((r) => [
    summary(r.name, spillway, r.value, r.samples.spillway, r.unit),
    summary(r.name, baseline, r.baseline_value, r.samples.baseline, r.unit),
  ]);
  const targets = rows.flatMap((r) => {
    const target = valueTarget(r.target);
    if (target === undefined) return [];
    const label = `target ${target.atMost ? "≤" : "≥"} ${formatNumber(target.value)} ${r.unit}`;
    // The target is on Spillway's figure: drawn on Spillway's row.
    return [{ scenario: r.name, side: spillway, target: target.value, label }];
  });
  const y = rowAxis(
    "scenario",
    rows.map((r) => r.name),
  );
  const yOffset = { field: "side", type: "nominal" as const, sort: sides };
  const color = {
    field: "side",
    type: "nominal" as const,
    sort: sides,
    title: null,
    scale: { domain: sides, range: sideColors },
  };
  const x = {
    type: "quantitative" as const,
    title: group.axis,
    scale: group.log === true ? { type: "log" as const } : { zero: true },
    axis: { grid: true, format: group.log === true ? ",~g" : ",~r" },
  };
  const title = `${group.title}: Spillway and its baseline`;
  return {
    file: `bench-${group.id}.svg`,
    title,
    spec: {
      ...specHead(
        title,
        `dots: each timed run · line: range over runs · bar and label: median${
          targets.length > 0 ? " · red: the target on the figure itself" : ""
        }`,
      ),
      height: { step: 26 },
      layer: [
        ...(targets.length === 0
          ? []
          : [
              {
                data: { values: targets },
                mark: { type: "tick" as const, color: "#d62728", thickness: 2, size: 18 },
                encoding: { y, yOffset, x: { ...x, field: "target" } },
              },
              {
                data: { values: targets },
                mark: {
                  type: "text" as const,
                  color: "#d62728",
                  align: "left" as const,
                  dx: 4,
                  dy: -10,
                  fontSize: 10,
                },
                encoding: { y, yOffset, x: { ...x, field: "target" }, text: { field: "label" } },
              },
            ]),
        {
          data: { values: medians },
          mark: { type: "rule", strokeWidth: 2, opacity: 0.6 },
          encoding: { y, yOffset, color, x: { ...x, field: "min" }, x2: { field: "max" } },
        },
        {
          data: { values: samples },
          mark: { type: "point", filled: false, size: 40, opacity: 0.8 },
          encoding: { y, yOffset, color, x: { ...x, field: "value" } },
        },
        {
          data: { values: medians },
          mark: { type: "tick", thickness: 3, size: 14 },
          encoding: { y, yOffset, color, x: { ...x, field: "median" } },
        },
        {
          data: { values: medians },
          mark: { type: "text", align: "left", dx: 6, fontSize: 11 },
          encoding: {
            y,
            yOffset,
            x: { ...x, field: "max" },
            text: { field: "label" },
            color: { value: "#333" },
          },
        },
      ],
      resolve: { scale: { x: "shared" } },
    },
  };
}

/** One side of a row: its median as reported, the range of its samples, and a label. */
function summary(
  scenario: string,
  side: string,
  median: number,
  samples: readonly number[],
  unit: string,
) {
  return {
    scenario,
    side,
    median,
    min: Math.min(...samples),
    max: Math.max(...samples),
    label: `${formatNumber(median)} ${unit}`,
  };
}

/** Every scenario's ratio (log axis), its target's threshold, and whether it was met. */
function ratioChart(results: readonly BenchResult[]): BenchChart {
  const rows = results.map((r) => {
    const threshold = ratioThreshold(r.target);
    return {
      scenario: r.name,
      ratio: r.ratio,
      met: r.met ? "target met" : "target missed",
      ...(threshold === undefined ? {} : { threshold }),
      label: `${formatNumber(r.ratio)} (target: ${targetText(r.target)})`,
    };
  });
  const y = rowAxis(
    "scenario",
    results.map((r) => r.name),
  );
  const x = {
    type: "quantitative" as const,
    title: "ratio against the baseline, as each target states it (log scale)",
    scale: { type: "log" as const, domain: [0.1, 10_000] },
    axis: { grid: true, format: ",~g" },
  };
  const title = "Each scenario's ratio against its baseline, and its target";
  return {
    file: "bench-ratios.svg",
    title,
    spec: {
      ...specHead(
        title,
        "dot: the ratio of the medians · black bar: the ratio the target asks for · dashed: parity",
      ),
      height: { step: 24 },
      data: { values: rows },
      layer: [
        {
          data: { values: [{ parity: 1 }] },
          mark: { type: "rule", strokeDash: [4, 4], color: "#999" },
          encoding: { x: { ...x, field: "parity" } },
        },
        {
          transform: [{ filter: "isValid(datum.threshold)" }],
          mark: { type: "tick", color: "black", thickness: 2, size: 16 },
          encoding: { y, x: { ...x, field: "threshold" } },
        },
        {
          mark: { type: "point", filled: true, size: 80 },
          encoding: {
            y,
            x: { ...x, field: "ratio" },
            color: {
              field: "met",
              type: "nominal",
              title: null,
              scale: { domain: ["target met", "target missed"], range: ["#2ca02c", "#d62728"] },
            },
          },
        },
        {
          // A column right of the plot, so no label hides a dot or a target.
          mark: { type: "text", align: "left", dx: 12, fontSize: 11 },
          encoding: {
            y,
            x: { value: width },
            text: { field: "label" },
            color: { value: "#333" },
          },
        },
      ],
    },
  };
}

/** The CPU seconds each process used per timed run, stacked, with the run's elapsed time. */
function cpuChart(rows: readonly BenchResult[]): BenchChart {
  const sidesOf = (r: BenchResult) =>
    [
      [spillway, r.cpu_seconds?.spillway ?? {}],
      [baseline, r.cpu_seconds?.baseline ?? {}],
    ] as const;
  const rowOf = (scenario: string, side: string) =>
    `${scenario} · ${side === spillway ? spillway : "baseline"}`;
  const cpu = rows.flatMap((r) =>
    sidesOf(r).flatMap(([side, seconds]) =>
      Object.entries(seconds)
        .filter(([process]) => process !== "wall")
        .map(([process, value]) => ({ row: rowOf(r.name, side), process, seconds: value })),
    ),
  );
  const wall = rows.flatMap((r) =>
    sidesOf(r).map(([side, seconds]) => ({ row: rowOf(r.name, side), seconds: seconds.wall ?? 0 })),
  );
  const processes = [...new Set(cpu.map((c) => c.process))];
  const y = rowAxis(
    "row",
    wall.map((w) => w.row),
    300,
  );
  const x = { type: "quantitative" as const, title: "seconds per timed run (medians)" };
  const title = "Where the time went, in the scenarios that meter each process's CPU";
  return {
    file: "bench-cpu.svg",
    title,
    spec: {
      ...specHead(
        title,
        "bars: each process's CPU seconds, stacked · black tick: the run's elapsed seconds",
        width - 100,
      ),
      height: { step: 22 },
      layer: [
        {
          data: { values: cpu },
          mark: { type: "bar" },
          encoding: {
            y,
            x: { ...x, field: "seconds", stack: "zero" },
            color: { field: "process", type: "nominal", sort: processes, title: "CPU of process" },
            order: { field: "process", sort: "ascending" },
          },
        },
        {
          data: { values: wall },
          mark: { type: "tick", color: "black", thickness: 3, size: 18 },
          encoding: { y, x: { ...x, field: "seconds" } },
        },
      ],
    },
  };
}

/** The ratio a target asks for (`ratio >= 0.6`, `ratio (a / b) >= 100`), if it is on the ratio. */
export function ratioThreshold(target: string): number | undefined {
  const match = /^ratio(?: \([^)]*\))? (?:>=|<=) ([0-9.]+)/.exec(target);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

/**
 * The figure a target sets on Spillway's own value, not on the ratio (`<= 170 µs CPU a record`,
 * `peak <= 256 MiB`, the `>= 2000 offloads/s` of `ratio >= 0.5 and >= 2000 offloads/s`), if any.
 */
export function valueTarget(target: string): { atMost: boolean; value: number } | undefined {
  const match = /(?:^|^peak |\band )(>=|<=) ([0-9.]+)/.exec(target);
  if (match?.[1] === undefined || match[2] === undefined) return undefined;
  return { atMost: match[1] === "<=", value: Number(match[2]) };
}

/** A target as a label: `≥`/`≤`, without a trailing parenthetical remark. */
function targetText(target: string): string {
  return target
    .replace(/\s*\([^)]*\)$/, "")
    .replaceAll(">=", "≥")
    .replaceAll("<=", "≤");
}

const numberFormat = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 4 });

/** A figure with thousands separators and at most three significant decimals. */
function formatNumber(value: number): string {
  return numberFormat.format(value);
}
