import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createLiteralFinder } from "./literal-finder.js";

describe("createLiteralFinder", () => {
  it("finds exactly what Buffer.indexOf finds, from any offset, whatever the byte mix", () => {
    const alphabet = fc.constantFrom(...[..."abcqz\n é"].map((c) => Buffer.from(c)));
    const bytesArb = fc.array(alphabet, { maxLength: 400 }).map((parts) => Buffer.concat(parts));
    fc.assert(
      fc.property(
        fc.array(bytesArb, { minLength: 1, maxLength: 3 }),
        fc.array(alphabet, { minLength: 1, maxLength: 4 }).map((p) => Buffer.concat(p)),
        fc.integer({ min: -3, max: 420 }),
        (haystacks, needle, from) => {
          const finder = createLiteralFinder(needle);
          for (const haystack of haystacks) {
            expect(finder.indexOf(haystack, from)).toBe(
              haystack.indexOf(needle, Math.max(0, from)),
            );
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("finds exactly what Buffer.indexOf finds for long needles taken from text like the haystack's", () => {
    // Words of a skewed alphabet, so rare and common needle bytes, probes, guards and partial
    // matches all occur; needles are cut from one of the haystacks, so most of them are found.
    const word = fc.constantFrom("session", "token", "expired", "xk", "e", "ee", " ", "\n", "tok");
    const textArb = fc.array(word, { maxLength: 600 }).map((w) => Buffer.from(w.join("")));
    fc.assert(
      fc.property(
        fc.array(textArb, { minLength: 1, maxLength: 3 }),
        fc.nat(),
        fc.integer({ min: 1, max: 24 }),
        fc.integer({ min: -3, max: 3000 }),
        (haystacks, cut, length, from) => {
          const source = haystacks[cut % haystacks.length] as Buffer;
          const at = source.length === 0 ? 0 : cut % source.length;
          const needle = Buffer.from(source.subarray(at, at + length));
          const finder = createLiteralFinder(needle);
          for (const haystack of haystacks) {
            for (let pos = from, found = 0; found < 50; found++) {
              const want = haystack.indexOf(needle, Math.max(0, pos));
              expect(finder.indexOf(haystack, pos)).toBe(want);
              if (want < 0) break;
              pos = want + 1;
            }
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("keeps finding every occurrence when the learned rare byte turns out to be common", () => {
    const needle = Buffer.from("zq");
    const finder = createLiteralFinder(needle);
    // Learned from a sample where q is rarer than z; then a buffer full of q's.
    expect(finder.indexOf(Buffer.from(`${"z".repeat(5000)}`), 0)).toBe(-1);
    const haystack = Buffer.from(`${"q".repeat(100_000)}zq${"q".repeat(10)}zq`);
    const found: number[] = [];
    for (let at = finder.indexOf(haystack, 0); at >= 0; at = finder.indexOf(haystack, at + 1)) {
      found.push(at);
    }
    expect(found).toEqual([100_000, 100_012]);
  });
});
