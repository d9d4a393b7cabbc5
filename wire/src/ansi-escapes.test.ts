import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { hasAnsi, maxAnsiSequenceChars, stripAnsi } from "./ansi-escapes.js";

interface StripVector {
  readonly name: string;
  readonly input: string;
  readonly stripped: string;
}

const vectors = (
  JSON.parse(
    readFileSync(new URL("../../conformance/ansi-strip-vectors.json", import.meta.url), "utf8"),
  ) as { vectors: StripVector[] }
).vectors;

describe("stripAnsi", () => {
  it.each(vectors.map((v) => [v.name, v] as const))("vector %s", (_name, v) => {
    expect(stripAnsi(v.input)).toBe(v.stripped);
  });

  it("returns text without ESC or a C1 introducer unchanged, and says so", () => {
    const text = "plain \t\r\u0085 text";
    expect(hasAnsi(text)).toBe(false);
    expect(stripAnsi(text)).toBe(text);
  });

  it("never removes more than one sequence's cap from an unterminated OSC", () => {
    const tail = "y".repeat(1_000_000);
    const stripped = stripAnsi(`\u001b]0;${tail}`);
    expect(stripped.length).toBe(tail.length + 4 - maxAnsiSequenceChars);
  });

  it("is idempotent over the vectors", () => {
    for (const v of vectors) expect(stripAnsi(v.stripped)).toBe(v.stripped);
  });
});
