import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { alternate, unsettled } from "./timing.js";

describe("bench timing", () => {
  it("calls a baseline settled when its samples spread within 30 % of their median", () => {
    expect(unsettled([100, 110, 120])).toBe(false);
    expect(unsettled([100, 140, 115])).toBe(true);
    expect(unsettled([80, 250, 80, 150, 80])).toBe(true);
    expect(unsettled([100])).toBe(true);
  });

  it("takes more rounds, up to three times the count, while the baseline is unsettled", async () => {
    const rounds: number[] = [];
    const noisy = await alternate(
      3,
      async () => undefined,
      async (run) => {
        rounds.push(run);
        await sleep(run % 2 === 0 ? 1 : 30);
      },
    );
    expect(noisy.baselineSeconds).toHaveLength(9);
    expect(noisy.spillwaySeconds).toHaveLength(9);
    expect(rounds).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});
