import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { benchCharts, ratioThreshold, valueTarget } from "./charts.js";
import { renderCharts } from "./render-charts.js";
import type { BenchResult } from "./result.js";

const root = new URL("../", import.meta.url);

async function committedResults(): Promise<BenchResult[]> {
  return JSON.parse(await readFile(new URL("bench/results.json", root), "utf8")) as BenchResult[];
}

describe("benchmark charts", () => {
  it("are the committed SVGs, byte for byte, drawn from the committed results.json", async () => {
    const rendered = await renderCharts(await committedResults());
    const stale: string[] = [];
    for (const chart of rendered) {
      const committed = await readFile(new URL(`docs/images/${chart.file}`, root), "utf8").catch(
        () => "",
      );
      if (committed !== chart.svg) stale.push(chart.file);
    }
    // Redraw with `npm run bench:plot` after changing bench/results.json or the charts.
    expect(stale).toEqual([]);
  });

  it("draws the same bytes twice", async () => {
    const results = await committedResults();
    const first = await renderCharts(results);
    const second = await renderCharts(results);
    expect(second.map((c) => c.svg)).toEqual(first.map((c) => c.svg));
  });

  it("are all embedded in docs/benchmarks.md", async () => {
    const doc = await readFile(new URL("docs/benchmarks.md", root), "utf8");
    for (const chart of benchCharts(await committedResults())) {
      expect(doc).toContain(`](images/${chart.file})`);
    }
  });

  it("draw every scenario's samples and medians in exactly one value chart", async () => {
    const results = await committedResults();
    const charts = benchCharts(results).filter(
      (c) => c.file !== "bench-ratios.svg" && c.file !== "bench-cpu.svg",
    );
    for (const r of results) {
      const holding = charts.filter((c) =>
        JSON.stringify(c.spec).includes(`"scenario":"${r.name}"`),
      );
      expect(holding.map((c) => c.file)).toHaveLength(1);
      const spec = JSON.stringify(holding[0]?.spec);
      for (const value of [...r.samples.spillway, ...r.samples.baseline]) {
        expect(spec).toContain(`"value":${value}`);
      }
      expect(spec).toContain(`"median":${r.value}`);
      expect(spec).toContain(`"median":${r.baseline_value}`);
    }
  });

  it("gives a scenario no group names a chart of its own", () => {
    const row: BenchResult = {
      name: "new_scenario",
      value: 2,
      unit: "ms",
      baseline: "b",
      baseline_value: 1,
      ratio: 2,
      target: "ratio <= 3",
      met: true,
      samples: { spillway: [2], baseline: [1] },
      range: { spillway: [2, 2], baseline: [1, 1] },
      rounds: 1,
    };
    expect(benchCharts([row]).map((c) => c.file)).toEqual([
      "bench-ratios.svg",
      "bench-new-scenario.svg",
    ]);
  });

  it("reads the ratio a target asks for, and none from a target on the value", () => {
    expect(ratioThreshold("ratio >= 0.6")).toBe(0.6);
    expect(ratioThreshold("ratio (harness / Spillway) >= 100")).toBe(100);
    expect(ratioThreshold("ratio >= 0.5 and >= 2000 offloads/s")).toBe(0.5);
    expect(ratioThreshold("peak <= 256 MiB")).toBeUndefined();
  });

  it("reads the figure a target sets on the value itself, and none from a ratio alone", () => {
    expect(valueTarget("peak <= 256 MiB")).toEqual({ atMost: true, value: 256 });
    expect(valueTarget("<= 170 µs CPU a record (a tenth of it)")).toEqual({
      atMost: true,
      value: 170,
    });
    expect(valueTarget("ratio >= 0.5 and >= 2000 offloads/s")).toEqual({
      atMost: false,
      value: 2000,
    });
    expect(valueTarget("ratio (harness / Spillway) >= 100")).toBeUndefined();
  });
});
