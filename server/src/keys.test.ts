import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  blobKey,
  decodeSegment,
  encodeSegment,
  type HandleKey,
  handleFor,
  parseHandle,
  recordKey,
} from "./keys.js";

describe("encodeSegment", () => {
  const tricky = [
    ".",
    "..",
    "a.b",
    "a/b",
    "a\\b",
    "a\u0000b",
    "%2E",
    "~x",
    "ünïcødé",
    "emoji 🎉",
    "file:src/main.ts",
    "",
  ];

  it("never yields a path separator, a dot, a tilde or NUL", () => {
    for (const value of tricky) {
      const encoded = encodeSegment(value);
      for (const forbidden of ["/", "\\", ".", "~", "\u0000"]) {
        expect(encoded).not.toContain(forbidden);
      }
    }
  });

  it("is injective and reversible", () => {
    const encoded = tricky.map(encodeSegment);
    expect(new Set(encoded).size).toBe(tricky.length);
    for (const value of tricky) expect(decodeSegment(encodeSegment(value))).toBe(value);
  });
});

describe("storage keys", () => {
  it("keep a dotted call id apart from a slot folded into the call segment", () => {
    const dotted = blobKey("t", "r", "a.stdout", undefined, "u");
    const slotted = blobKey("t", "r", "a", "stdout", "u");
    expect(dotted).not.toBe(slotted);
    expect(slotted).toBe("t/t/r/r/b/a.stdout/u");
  });

  it("fold the tenant into every key and escape traversal", () => {
    expect(recordKey("acme", "..", "res_x")).toBe("t/acme/r/%2E%2E/h/res_x");
    expect(recordKey("acme", "r", "../../etc")).toBe("t/acme/r/r/h/%2E%2E%2F%2E%2E%2Fetc");
  });

  it("bound every segment so keys fit every store, without collisions", () => {
    const long = "x".repeat(1000);
    const key = recordKey("t".repeat(64), "é".repeat(64), `res_${long}`);
    expect(key.length).toBeLessThan(1024);
    for (const part of key.split("/")) expect(part.length).toBeLessThanOrEqual(200);
    expect(recordKey("t", "r", `res_${long}`)).not.toBe(recordKey("t", "r", `res_${long}y`));
    const slot = `file:${"d/".repeat(250)}f`;
    const blob = blobKey("t", "r", "c".repeat(128), slot, "u");
    expect(blob.length).toBeLessThan(1024);
    expect(blob).not.toBe(blobKey("t", "r", "c".repeat(128), `${slot}x`, "u"));
  });

  it("name handles as the design says", () => {
    expect(handleFor("call1", undefined)).toBe("res_call1");
    expect(handleFor("call1", "file:out/a.txt")).toBe("out_call1_file:out/a.txt");
  });
});

describe("handles", () => {
  // Pieces that make `_` and `%` ambiguous, look like handles or slots, or are not ASCII.
  const piece = fc.oneof(
    fc.constantFrom(
      "_",
      "__",
      "%",
      "%5F",
      "%25",
      "%5f",
      "file:",
      "file:x_",
      "_stdout",
      "stdout",
      "res_",
      "out_",
      "/",
      ".",
      "toolu_01A",
      "call_abc_123",
      "\u00e9",
      "\ud83c\udf89",
      "\u2028",
    ),
    fc.string({ unit: "grapheme", maxLength: 4 }),
  );
  const text = fc.array(piece, { minLength: 1, maxLength: 5 }).map((p) => p.join(""));
  const slot = fc.oneof(
    fc.constant(undefined),
    fc.constantFrom("stdout", "stderr", "value"),
    text.map((path) => `file:${path}`),
  );
  // Call ids are never empty (the proto's rule); any slot text is encoded, valid path or not.
  const key: fc.Arbitrary<HandleKey> = fc
    .tuple(
      text.filter((t) => t !== ""),
      slot,
    )
    .map(([callId, s]) => (s === undefined ? { callId } : { callId, slot: s }));
  const handleOf = (k: HandleKey) => handleFor(k.callId, k.slot);

  it("gives distinct keys distinct handles, and each parses back to its key", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(key, {
          minLength: 2,
          maxLength: 8,
          selector: (k) => JSON.stringify([k.callId, k.slot ?? null]),
        }),
        (keys) => {
          const handles = keys.map(handleOf);
          expect(new Set(handles).size).toBe(keys.length);
          for (const [i, k] of keys.entries()) expect(parseHandle(handles[i] ?? "")).toEqual(k);
        },
      ),
      {
        numRuns: 2000,
        examples: [
          [
            [
              { callId: "a", slot: "file:x_stdout" },
              { callId: "a_file:x", slot: "stdout" },
            ],
          ],
          [
            [
              { callId: "a", slot: "file:b%5Fc" },
              { callId: "a", slot: "file:b_c" },
            ],
          ],
        ],
      },
    );
  });

  it("parses only what it makes: a parsed string is the handle of what it parsed to", () => {
    const candidate = fc.oneof(
      text,
      text.map((t) => `res_${t}`),
      text.map((t) => `out_${t}`),
      fc.tuple(text, text).map(([c, s]) => `out_${c}_${s}`),
    );
    fc.assert(
      fc.property(candidate, (h) => {
        const k = parseHandle(h);
        if (k !== undefined) expect(handleOf(k)).toBe(h);
      }),
      { numRuns: 2000 },
    );
    for (const h of ["res_", "out_", "out__stdout", "out_a_", "out_a_%5f", "out_a_%", "x_a"]) {
      expect(parseHandle(h)).toBeUndefined();
    }
  });

  it("keep today's handles for provider call ids and slots without _ or %", () => {
    expect(handleFor("toolu_01A09q90qw90lq917835lq9", undefined)).toBe(
      "res_toolu_01A09q90qw90lq917835lq9",
    );
    expect(handleFor("call_abc_123", "stdout")).toBe("out_call_abc_123_stdout");
    expect(handleFor("call_abc_123", "file:src/main.ts")).toBe("out_call_abc_123_file:src/main.ts");
    expect(parseHandle("out_call_abc_123_stdout")).toEqual({
      callId: "call_abc_123",
      slot: "stdout",
    });
    expect(handleFor("a", "file:x_stdout")).toBe("out_a_file:x%5Fstdout");
    expect(handleFor("a", "file:100%")).toBe("out_a_file:100%25");
  });
});
