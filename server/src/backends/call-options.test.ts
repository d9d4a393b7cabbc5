import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { sweepCutoffMs } from "./call-options.js";

describe("sweepCutoffMs", () => {
  it("returns now minus the age", () => {
    const before = Date.now();
    const cutoff = sweepCutoffMs(60_000);
    const after = Date.now();
    expect(cutoff).toBeGreaterThanOrEqual(before - 60_000);
    expect(cutoff).toBeLessThanOrEqual(after - 60_000);
  });

  it("accepts an age of zero (sweep everything left so far)", () => {
    expect(sweepCutoffMs(0)).toBeLessThanOrEqual(Date.now());
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])("refuses %d with INVALID_ARGUMENT", (age) => {
    expect(() => sweepCutoffMs(age)).toThrow(
      expect.objectContaining({ code: Code.InvalidArgument }),
    );
  });
});
