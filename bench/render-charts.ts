import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as vega from "vega";
import { parse, View } from "vega";
import { compile } from "vega-lite";
import { type BenchChart, benchCharts } from "./charts.js";
import type { BenchResult } from "./result.js";

// Text widths decide the layout. Vega measures them with the `canvas` package when one is
// installed and estimates them otherwise; always estimating keeps a chart byte-identical
// whatever is installed. Vega exports textMetrics at run time but its typings omit it.
(vega as unknown as { textMetrics: { canvas(use: boolean): void } }).textMetrics.canvas(false);

/** RenderedChart is a chart and its SVG text. */
export interface RenderedChart extends BenchChart {
  /** The SVG document, ending in a newline. */
  readonly svg: string;
}

/**
 * renderCharts draws every chart of benchCharts(results) as SVG, headlessly (Vega's SVG
 * renderer, no canvas, no browser).
 *
 * Guarantees: the same rows give byte-identical SVGs.
 */
export async function renderCharts(results: readonly BenchResult[]): Promise<RenderedChart[]> {
  const rendered: RenderedChart[] = [];
  for (const chart of benchCharts(results)) {
    const view = new View(parse(compile(chart.spec).spec), { renderer: "none" });
    try {
      rendered.push({ ...chart, svg: `${await view.toSVG()}\n` });
    } finally {
      view.finalize();
    }
  }
  return rendered;
}

/**
 * writeCharts renders the charts of `results` into `dir` (created if missing), one SVG file
 * each, and returns the files written.
 */
export async function writeCharts(results: readonly BenchResult[], dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  for (const chart of await renderCharts(results)) {
    const file = join(dir, chart.file);
    await writeFile(file, chart.svg);
    files.push(file);
  }
  return files;
}
