import { describe, expect, it } from "vitest";
import { connectionAgeMs } from "./connection-age.js";

describe("connectionAgeMs", () => {
  it("spreads a maximum by ±10 %", () => {
    expect(connectionAgeMs(60_000, () => 0)).toBe(54_000);
    expect(connectionAgeMs(60_000, () => 1)).toBe(66_000);
  });

  it("never passes the longest timer Node waits, however high the maximum", () => {
    expect(connectionAgeMs(2 ** 31 - 1, () => 1)).toBe(2 ** 31 - 1);
    expect(connectionAgeMs(24 * 86_400_000, () => 0.99)).toBe(2 ** 31 - 1);
  });
});
