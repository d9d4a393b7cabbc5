import { writeFile } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { BenchResult } from "./result.js";
import { filesystemScenarios } from "./scenarios/filesystem.js";
import { minioScenarios } from "./scenarios/minio.js";

const MiB = 1024 * 1024;

/**
 * The benchmark runner: each scenario measures Spillway and its baseline in the same run,
 * alternating, and reports medians and their ratio. `--quick` keeps the whole run short;
 * `--only <name>` runs the scenarios whose name contains it.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: "boolean" }, only: { type: "string" }, runs: { type: "string" } },
  });
  const runs = Number(values.runs ?? (values.quick === true ? 3 : 5));
  const bytes = 256 * MiB;
  const groups: { names: string[]; run: () => Promise<BenchResult[]> }[] = [
    {
      names: ["offload_256mib_fs", "read_full_256mib_fs"],
      run: () => filesystemScenarios({ runs, bytes }),
    },
    { names: ["offload_256mib_minio"], run: () => minioScenarios({ runs, bytes }) },
  ];
  const results: BenchResult[] = [];
  for (const group of groups) {
    if (values.only !== undefined && !group.names.some((n) => n.includes(values.only ?? ""))) {
      continue;
    }
    results.push(...(await group.run()));
  }
  const out = fileURLToPath(new URL("../../bench/results.json", import.meta.url));
  await writeFile(out, `${JSON.stringify(results, null, 2)}\n`);
  const cpu = cpus()[0]?.model ?? "unknown CPU";
  process.stdout.write(
    `\nmachine: ${cpus().length} x ${cpu}, ${Math.round(totalmem() / 2 ** 30)} GiB; runs: ${runs} (medians)\n\n`,
  );
  process.stdout.write(
    "| scenario | spillway | baseline | ratio | target | met |\n|---|---|---|---|---|---|\n",
  );
  for (const r of results) {
    process.stdout.write(
      `| ${r.name} | ${r.value} ${r.unit} | ${r.baseline_value} ${r.unit} (${r.baseline}) | ${r.ratio} | ${r.target} | ${r.met ? "yes" : "no"} |\n`,
    );
  }
  process.stdout.write(`\nwrote ${out}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
