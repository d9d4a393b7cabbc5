import { describe, expect, it } from "vitest";
import { mismatch } from "./match.js";

describe("mismatch", () => {
  it("accepts a partial object and a number for a 64-bit decimal string", () => {
    expect(mismatch({ a: 1, b: { c: true } }, { a: "1", b: { c: true, d: 2 }, e: 3 })).toBe(
      undefined,
    );
  });

  it("names the first differing path", () => {
    expect(mismatch({ b: { c: true } }, { b: { c: false } }, "trailer")).toBe(
      "trailer.b.c: expected true, got false",
    );
    expect(mismatch(["x", "y"], ["x", "z"], "lineTexts")).toBe(
      'lineTexts[1]: expected "y", got "z"',
    );
    expect(mismatch(["x"], ["x", "y"], "handles")).toBe("handles: expected 1 items, got 2");
  });

  it("tests presence with $present and $absent", () => {
    expect(mismatch({ t: "$present" }, {})).toBe(".t: missing");
    expect(mismatch({ t: "$absent" }, { t: "2026" })).toBe('.t: expected absent, got "2026"');
    expect(mismatch({ t: "$absent", u: "$present" }, { u: 0 })).toBe(undefined);
  });
});
