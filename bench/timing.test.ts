import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { alternate, settleRounds, unsettled } from "./timing.js";

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

  /** A round that reports `baseline` from the sequence (its last value once past the end). */
  const rounds = (baseline: readonly number[]) => {
    const runs: number[] = [];
    const round = async (run: number) => {
      runs.push(run);
      return {
        baseline: baseline[Math.min(run, baseline.length) - 1] ?? Number.NaN,
        spillway: run,
      };
    };
    return { runs, round };
  };

  it("settleRounds takes just the count while the baseline is settled", async () => {
    const { runs, round } = rounds([100, 110, 120, 100]);
    const samples = await settleRounds(4, round, "baseline");
    expect(runs).toEqual([1, 2, 3, 4]);
    expect(samples).toEqual({ baseline: [100, 110, 120, 100], spillway: [1, 2, 3, 4] });
  });

  it("settleRounds takes more rounds while unsettled and stops as soon as it settles", async () => {
    // Spread over median: 0.4 after 3 rounds, 0.33 after 4, 0.29 after 5.
    const { runs, round } = rounds([100, 100, 140]);
    const samples = await settleRounds(3, round, "baseline");
    expect(runs).toEqual([1, 2, 3, 4, 5]);
    expect(samples.baseline).toEqual([100, 100, 140, 140, 140]);
    expect(samples.spillway).toEqual([1, 2, 3, 4, 5]);
  });

  it("settleRounds takes a second round after one, whose spread is unknown", async () => {
    const { runs, round } = rounds([100, 105]);
    expect((await settleRounds(1, round, "baseline")).baseline).toEqual([100, 105]);
    expect(runs).toEqual([1, 2]);
  });

  it("settleRounds stops at three times the count, or at maxCount, when it never settles", async () => {
    const noisy = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? 100 : 200));
    const tripled = rounds(noisy);
    expect((await settleRounds(3, tripled.round, "baseline")).spillway).toHaveLength(9);
    expect(tripled.runs).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const capped = rounds(noisy);
    expect((await settleRounds(2, capped.round, "baseline", 5)).baseline).toHaveLength(5);
    expect(capped.runs).toEqual([1, 2, 3, 4, 5]);
    const below = rounds(noisy);
    expect((await settleRounds(4, below.round, "baseline", 2)).baseline).toHaveLength(4);
  });

  it("settleRounds settles on the baseline figure only", async () => {
    const round = async (run: number) => ({ baseline: 100, spillway: run % 2 === 0 ? 1 : 50 });
    expect((await settleRounds(3, round, "baseline")).spillway).toEqual([50, 1, 50]);
  });
});
