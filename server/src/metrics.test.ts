import { AggregatorRegistry, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createMetrics } from "./metrics.js";

describe("metrics combined over workers", () => {
  it("gives the fullest worker's open descriptors over the lowest limit, not their sums", async () => {
    const worker = createMetrics(new Registry());
    const mine = (await worker.registry.getMetricsAsJSON()).filter((m) =>
      ["spillway_process_open_fds", "spillway_process_max_fds"].includes(m.name),
    );
    expect(mine.map((m) => m.name).sort()).toEqual([
      "spillway_process_max_fds",
      "spillway_process_open_fds",
    ]);
    // Two workers as the primary receives them: one near its limit, one nearly idle.
    const as = (open: number, max: number) =>
      mine.map((m) => ({
        ...m,
        values: [{ value: m.name.endsWith("open_fds") ? open : max, labels: {} }],
      }));
    const combined = await AggregatorRegistry.aggregate([
      as(950, 1024),
      as(40, 1024),
    ] as never).getMetricsAsJSON();
    const value = (name: string) => combined.find((m) => m.name === name)?.values[0]?.value;
    expect(value("spillway_process_open_fds")).toBe(950);
    expect(value("spillway_process_max_fds")).toBe(1024);
  });
});
