import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { writeCharts } from "./render-charts.js";
import type { BenchResult } from "./result.js";

/**
 * Redraws the charts of docs/benchmarks.md from bench/results.json as it stands
 * (`npm run bench:plot`); `npm run bench` does the same at its end.
 */
async function main(): Promise<void> {
  const results = JSON.parse(
    await readFile(fileURLToPath(new URL("../../bench/results.json", import.meta.url)), "utf8"),
  ) as BenchResult[];
  const dir = fileURLToPath(new URL("../../docs/images", import.meta.url));
  for (const file of await writeCharts(results, dir)) process.stdout.write(`${file}\n`);
}

await main();
