import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import type { BenchResult } from "./result.js";

const root = new URL("../", import.meta.url);

/** The table rows (lines starting `| \``) of the part of `doc` between two headings. */
function rowsBetween(doc: string, from: string, to: string): string[][] {
  const part = doc.slice(doc.indexOf(from), doc.indexOf(to));
  return part
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) =>
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
}

describe("docs/benchmarks.md", () => {
  it("defines every scenario once, gives its figures once, and the last run as results.json has it", async () => {
    const doc = await readFile(new URL("docs/benchmarks.md", root), "utf8");
    const results = JSON.parse(
      await readFile(new URL("bench/results.json", root), "utf8"),
    ) as BenchResult[];
    // Scenarios: scenario, what, baseline, target. Results: scenario, Spillway, baseline,
    // ratio, target, ratios over the runs. A row edited into the wrong table changes its width.
    const scenarios = rowsBetween(doc, "## Scenarios", "## Results");
    const figures = rowsBetween(doc, "## Results", "## The last full run");
    // The last full run: scenario, Spillway, baseline, rounds, ratio, target, met; as
    // bench/results.json has them (the charts draw that file).
    const last = rowsBetween(doc, "## The last full run", "## Charts");
    expect(scenarios.filter((cells) => cells.length !== 4).map((cells) => cells[0])).toEqual([]);
    expect(figures.filter((cells) => cells.length !== 6).map((cells) => cells[0])).toEqual([]);
    expect(last.map((cells) => cells[0])).toEqual(results.map(({ name }) => `\`${name}\``));
    for (const [k, { ratio, met }] of results.entries()) {
      const cells = last[k] ?? [];
      expect([cells[4], cells[6]]).toEqual([String(ratio), met ? "yes" : "no"]);
    }
    for (const { name } of results) {
      const named = `\`${name}\``;
      expect(
        scenarios.filter((cells) => cells[0]?.includes(named)),
        name,
      ).toHaveLength(1);
      expect(
        figures.filter((cells) => cells[0] === named),
        name,
      ).toHaveLength(1);
    }
  });
});
