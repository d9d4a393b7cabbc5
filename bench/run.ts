import { readFile, writeFile } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { everyCore, oneWorker } from "./filesystem-spillway.js";
import { type LogFixture, openLogFixture } from "./log-fixture.js";
import { writeMixedLogFile } from "./mixed-log-file.js";
import { writeCharts } from "./render-charts.js";
import type { BenchResult } from "./result.js";
import { busyTenantScenarios } from "./scenarios/busy-tenant.js";
import { callFloorScenarios } from "./scenarios/call-floor.js";
import { cliCatScenarios } from "./scenarios/cli-cat.js";
import { concurrentOffloadScenario, concurrentOffloads } from "./scenarios/concurrent-offloads.js";
import { filesystemScenarios } from "./scenarios/filesystem.js";
import { jsonViewScenario } from "./scenarios/json-view.js";
import { jsonPathScenarios } from "./scenarios/jsonpath.js";
import { memoryScenario } from "./scenarios/memory.js";
import { minioScenarios } from "./scenarios/minio.js";
import { deleteRunScenario, replayScenario } from "./scenarios/replays.js";
import { searchScenarios } from "./scenarios/search.js";
import { searchPagingScenario } from "./scenarios/search-paging.js";
import { smallOffloadScenario } from "./scenarios/small-offloads.js";
import { sweepScenario } from "./scenarios/sweep.js";
import { windowScenarios } from "./scenarios/windows.js";

const MiB = 1024 * 1024;

/** A set of scenarios that share their setup. */
interface Group {
  readonly names: readonly string[];
  readonly run: () => Promise<BenchResult[]>;
}

/**
 * The benchmark runner: each scenario measures Spillway and its baseline in the same run,
 * alternating, and reports medians and their ratio. `--quick` keeps the whole run short;
 * `--only <name>` runs the scenarios whose name contains it and updates just their rows of
 * bench/results.json.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: "boolean" }, only: { type: "string" }, runs: { type: "string" } },
  });
  const quick = values.quick === true;
  /** A scenario's count: `--runs` when given, else its own for a quick or a full run. */
  const runsOr = (quickCount: number, fullCount: number) =>
    Number(values.runs ?? (quick ? quickCount : fullCount));
  const runs = runsOr(3, 5);
  // The 256 MiB transfers take a second or two a run and their ratios move the most between
  // runs (the baselines follow the disk's and the CPU's phases): they take more runs.
  const transferRuns = runsOr(7, 9);
  const bytes = 256 * MiB;
  // The 1 GiB log is written and offloaded once, for every scenario that reads it.
  let fixture: Promise<LogFixture> | undefined;
  const log = () => {
    fixture ??= openLogFixture(1024 * MiB);
    return fixture;
  };
  const groups: Group[] = [
    {
      names: ["offload_256mib_fs", "read_full_256mib_fs"],
      run: () => filesystemScenarios({ runs: transferRuns, bytes }),
    },
    {
      names: ["offload_256mib_minio"],
      run: () => minioScenarios({ runs: transferRuns, bytes }),
    },
    {
      names: ["offload_concurrent_16", "offload_concurrent_16_one_worker"],
      run: async () => [
        await concurrentOffloadScenario({ runs, ...concurrentOffloads, topology: everyCore }),
        await concurrentOffloadScenario({ runs, ...concurrentOffloads, topology: oneWorker }),
      ],
    },
    {
      names: ["small_offloads", "small_offloads_one_worker"],
      run: async () => [
        await smallOffloadScenario(runs, everyCore),
        await smallOffloadScenario(runs, oneWorker),
      ],
    },
    {
      names: ["replay_offloads"],
      run: async () => [await replayScenario(runs)],
    },
    {
      names: ["delete_run_10k"],
      run: async () => [await deleteRunScenario(runs)],
    },
    {
      names: ["sweep_per_record"],
      run: async () => [await sweepScenario(runs)],
    },
    {
      names: ["deep_window_1gib", "tail_window_1gib", "deep_window_vs_anchor"],
      run: async () => windowScenarios(await log(), runs),
    },
    {
      names: [
        "call_floor",
        "deep_window_vs_floor",
        "call_floor_python",
        "deep_window_vs_floor_python",
      ],
      run: async () => callFloorScenarios(await log(), runs),
    },
    {
      names: ["search_literal_1gib", "search_regex_1gib"],
      run: async () => searchScenarios(await log(), runs),
    },
    {
      names: [
        "search_literal_mixed_1gib",
        "search_regex_mixed_1gib",
        "search_regex_common_text_mixed_1gib",
        "search_literal_ignore_case_mixed_1gib",
      ],
      run: async () => {
        const fx = await openLogFixture(1024 * MiB, writeMixedLogFile);
        try {
          return await searchScenarios(fx, runs, {
            name: "mixed_1gib",
            literalRatio: 2,
            regexRatio: 1.5,
            commonTextRatio: 1.5,
            ignoreCaseRatio: 1,
          });
        } finally {
          await fx.close();
        }
      },
    },
    {
      names: ["search_paging_64mib"],
      run: async () => {
        const fx = await openLogFixture(64 * MiB);
        try {
          return [await searchPagingScenario(fx, runs)];
        } finally {
          await fx.close();
        }
      },
    },
    {
      names: ["search_beside_busy_tenant_256mib", "window_beside_busy_jsonpath_32mib"],
      run: () => busyTenantScenarios(runs),
    },
    {
      names: ["json_view_window_1gib"],
      run: async () => [await jsonViewScenario(runs)],
    },
    {
      names: ["cli_cat_disk_1gib", "cli_cat_count_1gib", "cli_cat_1gib"],
      run: () => cliCatScenarios({ runs: transferRuns, bytes: 1024 * MiB }),
    },
    // The 1 GiB JSONPath queries and the memory replicas take minutes a round: fewer rounds.
    {
      names: ["jsonpath_filter_1gib", "jsonpath_descendant_1gib", "jsonpath_peak_rss_1gib"],
      run: () => jsonPathScenarios(runsOr(1, 2)),
    },
    {
      names: ["memory_under_load"],
      run: async () => [await memoryScenario(await log(), runsOr(1, 3))],
    },
  ];
  const results: BenchResult[] = [];
  try {
    for (const group of groups) {
      if (values.only !== undefined && !group.names.some((n) => n.includes(values.only ?? ""))) {
        continue;
      }
      const started = Date.now();
      results.push(...(await group.run()));
      process.stderr.write(
        `bench: ${group.names.join(", ")} in ${Math.round((Date.now() - started) / 1000)} s\n`,
      );
    }
  } finally {
    await (await fixture)?.close();
  }
  const out = fileURLToPath(new URL("../../bench/results.json", import.meta.url));
  // A partial run (--only) replaces its own rows and keeps the others of the last full run.
  const kept =
    values.only === undefined
      ? []
      : (JSON.parse(await readFile(out, "utf8").catch(() => "[]")) as BenchResult[]).filter(
          (old) => !results.some((r) => r.name === old.name),
        );
  const order = groups.flatMap((g) => g.names);
  const merged = [...kept, ...results].sort(
    (a, b) => order.indexOf(a.name) - order.indexOf(b.name),
  );
  await writeFile(out, `${JSON.stringify(merged, null, 2)}\n`);
  const cpu = cpus()[0]?.model ?? "unknown CPU";
  process.stdout.write(
    `\nmachine: ${cpus().length} x ${cpu}, ${Math.round(totalmem() / 2 ** 30)} GiB; runs: ${runs} (medians; more rounds while a baseline is unsettled)\n\n`,
  );
  process.stdout.write(
    "| scenario | spillway | spillway range | baseline | baseline range | rounds | ratio | target | met |\n|---|---|---|---|---|---|---|---|---|\n",
  );
  for (const r of results) {
    const { spillway, baseline } = r.range;
    process.stdout.write(
      `| ${r.name} | ${r.value} ${r.unit} | ${spillway[0]}-${spillway[1]} | ${r.baseline_value} ${r.unit} (${r.baseline}) | ${baseline[0]}-${baseline[1]} | ${r.rounds} | ${r.ratio} | ${r.target} | ${r.met ? "yes" : "no"} |\n`,
    );
  }
  const metered = results.filter((r) => r.cpu_seconds !== undefined);
  if (metered.length > 0) {
    process.stdout.write(
      "\nwhere the time went (medians per run, seconds: elapsed, then each process's CPU):\n\n| scenario | side | wall | CPU |\n|---|---|---|---|\n",
    );
    for (const r of metered) {
      for (const [side, use] of Object.entries(r.cpu_seconds ?? {})) {
        const { wall, ...cpu } = use;
        const total = Object.values(cpu).reduce((sum, s) => sum + s, 0);
        const parts = Object.entries(cpu).map(([label, s]) => `${label} ${s}`);
        process.stdout.write(
          `| ${r.name} | ${side} | ${wall} | ${parts.join(", ")}; total ${total.toFixed(2)} |\n`,
        );
      }
    }
  }
  for (const r of results.filter((row) => row.peak_rss_mib !== undefined)) {
    process.stdout.write(
      `\npeak RSS (${r.name}, median): spillway ${r.peak_rss_mib?.spillway} MiB, baseline ${r.peak_rss_mib?.baseline} MiB\n`,
    );
  }
  process.stdout.write(`\nwrote ${out}\n`);
  // The charts of docs/benchmarks.md follow the rows just written (a partial run's too).
  const charts = fileURLToPath(new URL("../../docs/images", import.meta.url));
  for (const file of await writeCharts(merged, charts)) process.stdout.write(`wrote ${file}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
