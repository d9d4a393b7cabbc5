import fc from "fast-check";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { findFolded, foldedPieces, newFoldedStreams, planFoldedSearch } from "./folded-text.js";

/** Every code point outside ASCII (surrogates aside), as one string. */
function allNonAscii(): string {
  const parts: string[] = [];
  for (let cp = 0x80; cp < 0x110000; cp++) {
    if (cp < 0xd800 || cp > 0xdfff) parts.push(String.fromCodePoint(cp));
  }
  return parts.join("");
}

/** Offsets of `piece` (lowercase) in `all`, ASCII case aside, one byte at a time. */
function naive(all: Buffer, piece: Buffer): number[] {
  const lower = Buffer.from(
    all.toString("latin1").replace(/[A-Z]/g, (c) => c.toLowerCase()),
    "latin1",
  );
  const found: number[] = [];
  for (let at = 0; at + piece.length <= lower.length; at++) {
    if (lower.subarray(at, at + piece.length).equals(piece)) found.push(at);
  }
  return found;
}

describe("foldedPieces", () => {
  it("rests on RE2: under `iu`, only k and s of printable ASCII match a character outside it", () => {
    const others = allNonAscii();
    const partners: string[] = [];
    for (let c = 0x20; c < 0x7f; c++) {
      const char = String.fromCharCode(c);
      const expression = new RE2(char.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&"), "giu");
      for (const match of others.matchAll(expression)) {
        partners.push(`${char} U+${(match[0].codePointAt(0) ?? 0).toString(16)}`);
      }
    }
    expect(partners.sort()).toEqual(["K U+212a", "S U+17f", "k U+212a", "s U+17f"]);
  });

  it("cuts texts at k, s and every character outside ASCII, lowercases, keeps 3 or more", () => {
    expect(foldedPieces(["Session Token EXPIRED"]).map(String)).toEqual(["en expired", "ion to"]);
    expect(foldedPieces(["ab", "x-Y"]).map(String)).toEqual(["x-y"]);
    // U+0130 lowercases to "i" and a combining dot, yet RE2 matches it to itself alone.
    expect(foldedPieces(["abİcde"]).map(String)).toEqual(["cde"]);
    expect(foldedPieces(["\tTab\nbed"]).map(String)).toEqual(["\ttab", "bed"]);
    expect(foldedPieces(["kskS", "é", ""])).toEqual([]);
  });
});

describe("planFoldedSearch", () => {
  it("looks for the piece holding the rarest byte of either case, and gives up on common ones", () => {
    const sample = Buffer.from("Error: RETRY later; error again. rEtRy? ".repeat(100));
    const pieces = [Buffer.from("error"), Buffer.from("y?")];
    expect(planFoldedSearch(pieces, sample)).toEqual({ piece: 1, anchor: 1, guard: 0 });
    expect(planFoldedSearch([Buffer.from("error")], sample)).toBeUndefined();
    expect(planFoldedSearch([], sample)).toBeUndefined();
  });
});

describe("findFolded", () => {
  it("finds exactly the piece's occurrences in either case, from ascending offsets", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("ab", "AB", "aB", "b", "x", "X", "\n", "é", "c", "1"), {
          maxLength: 200,
        }),
        fc.constantFrom("ab", "abx", "bab", "x1", "c\nx"),
        fc.array(fc.nat(), { maxLength: 5 }),
        fc.nat(),
        (parts, text, hops, cut) => {
          const all = Buffer.from(parts.join(""));
          const piece = Buffer.from(text);
          const plan = planFoldedSearch([piece], all) ?? { piece: 0, anchor: 0, guard: -1 };
          const end = all.length === 0 ? 0 : cut % (all.length + 1);
          const occurrences = naive(all, piece).filter((at) => at < end);
          const streams = newFoldedStreams();
          // Asked from just past each offset found, or a little further on now and then.
          const found: number[] = [];
          const expected: number[] = [];
          let from = 0;
          let want = 0;
          for (let k = 0; ; k++) {
            const at = findFolded(all, from, end, piece, plan, streams);
            const next = occurrences.find((o) => o >= want) ?? -1;
            if (at >= 0) found.push(at);
            if (next >= 0) expected.push(next);
            if (at < 0 || next < 0) break;
            from = at + 1 + ((hops[k] ?? 0) % 3);
            want = next + 1 + ((hops[k] ?? 0) % 3);
          }
          expect(found).toEqual(expected);
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("forgets what it found when handed another view", () => {
    const piece = Buffer.from("needle");
    const plan = { piece: 0, anchor: 0, guard: -1 };
    const streams = newFoldedStreams();
    const one = Buffer.from("....NEEDLE");
    expect(findFolded(one, 0, one.length, piece, plan, streams)).toBe(4);
    const two = Buffer.from("Needle....");
    expect(findFolded(two, 0, two.length, piece, plan, streams)).toBe(0);
  });
});
