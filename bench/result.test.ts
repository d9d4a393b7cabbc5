import { describe, expect, it } from "vitest";
import { ratioResult } from "./result.js";

const row = (spillway: number[], baselineSamples: number[], rounds?: number) =>
  ratioResult({
    name: "s",
    unit: "ms",
    baseline: "b",
    spillway,
    baselineSamples,
    ratioOf: (value, baseline) => value / baseline,
    target: "ratio <= 2",
    meets: (ratio) => ratio <= 2,
    rounds,
  });

describe("bench rows", () => {
  it("carry each side's range, of the rounded samples, and the rounds taken", () => {
    const r = row([3.04, 1.26, 2], [10, 8.01, 12.96, 9]);
    expect(r.range).toEqual({ spillway: [1.3, 3], baseline: [8, 13] });
    expect(r.rounds).toBe(4);
    expect(r.value).toBe(2);
    expect(r.baseline_value).toBe(9.5);
  });

  it("take the rounds given where a round took other than one baseline sample", () => {
    const r = row([200, 190, 210, 205], [138.1], 2);
    expect(r.range).toEqual({ spillway: [190, 210], baseline: [138.1, 138.1] });
    expect(r.rounds).toBe(2);
  });
});
