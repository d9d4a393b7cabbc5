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
  recordNameOfKey,
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

  it("keeps handles, record keys and blob keys injective over attempts too", () => {
    const attempt = fc.oneof(fc.constant(undefined), fc.integer({ min: 2, max: 1000 }));
    const attemptKey = fc
      .tuple(key, attempt)
      .map(([k, a]) => (a === undefined ? k : { ...k, attempt: a }));
    fc.assert(
      fc.property(
        fc.uniqueArray(attemptKey, {
          minLength: 2,
          maxLength: 8,
          selector: (k) => JSON.stringify([k.callId, k.slot ?? null, k.attempt ?? 1]),
        }),
        (keys) => {
          const handles = keys.map((k) => handleFor(k.callId, k.slot, k.attempt));
          expect(new Set(handles).size).toBe(keys.length);
          expect(new Set(handles.map((h) => recordKey("t", "r", h))).size).toBe(keys.length);
          const blobs = keys.map((k) => blobKey("t", "r", k.callId, k.slot, "u", k.attempt));
          expect(new Set(blobs).size).toBe(keys.length);
          for (const [i, k] of keys.entries()) expect(parseHandle(handles[i] ?? "")).toEqual(k);
        },
      ),
      { numRuns: 1000 },
    );
    const retryish = fc.oneof(
      fc.tuple(fc.constantFrom("res@", "out@"), fc.string({ maxLength: 5 }), text),
      fc.tuple(
        fc.constantFrom("res@", "out@"),
        fc.integer({ min: -5, max: 1100 }).map(String),
        text.map((t) => `_${t}`),
      ),
    );
    fc.assert(
      fc.property(retryish, ([prefix, n, rest]) => {
        const h = `${prefix}${n}${rest}`;
        const k = parseHandle(h);
        if (k !== undefined) expect(handleFor(k.callId, k.slot, k.attempt)).toBe(h);
      }),
      { numRuns: 2000 },
    );
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

describe("attempts", () => {
  const callIds = ["x", "x-y", "x0", "x_y", "x.y", "a%2E", "x!", "x@2", "é", "c".repeat(128)];
  const slots = [undefined, "stdout", "file:a.b", "file:x_stdout", `file:${"d/".repeat(250)}f`];
  const attempts = [undefined, 2, 3, 9, 10, 11, 99, 100, 999, 1000];

  it("name a retry res@<n>_ / out@<n>_ and keep the first attempt's handle for 0, 1 and none", () => {
    for (const first of [undefined, 0, 1]) {
      expect(handleFor("call1", undefined, first)).toBe("res_call1");
      expect(handleFor("call1", "stdout", first)).toBe("out_call1_stdout");
    }
    expect(handleFor("call1", undefined, 2)).toBe("res@2_call1");
    expect(handleFor("call_abc_1", "file:x_y", 1000)).toBe("out@1000_call_abc_1_file:x%5Fy");
    expect(parseHandle("res@2_call1")).toEqual({ callId: "call1", attempt: 2 });
    expect(parseHandle("out@1000_call_abc_1_file:x%5Fy")).toEqual({
      callId: "call_abc_1",
      slot: "file:x_y",
      attempt: 1000,
    });
    // A call id may itself start like a retry's marker; its first attempt keeps `res_`.
    expect(parseHandle("res_@2_x")).toEqual({ callId: "@2_x" });
  });

  it("refuse forged retry handles: attempt 0 or 1, leading zeros, over 1000, no digits", () => {
    for (const forged of [
      "res@0_x",
      "res@1_x",
      "res@01_x",
      "res@002_x",
      "res@1001_x",
      "res@9999_x",
      "res@10000_x",
      "res@_x",
      "res@2x_y",
      "res@2",
      "res@2_",
      "res@-2_x",
      "res@+2_x",
      "res@ 2_x",
      "res@２_x",
      "out@2_x_",
      "out@2__stdout",
      "out@2_x_a%5f",
      "out@1_x_stdout",
      "out@0_x_stdout",
      "res@@2_x",
      "RES@2_x",
    ]) {
      expect(parseHandle(forged), forged).toBeUndefined();
    }
  });

  it("give every (call, slot, attempt) its own handle, record key and blob segment", () => {
    const handles = new Set<string>();
    const records = new Set<string>();
    const blobs = new Set<string>();
    let n = 0;
    for (const callId of callIds) {
      for (const slot of slots) {
        for (const attempt of attempts) {
          n++;
          const handle = handleFor(callId, slot, attempt);
          handles.add(handle);
          records.add(recordKey("t", "r", handle));
          blobs.add(blobKey("t", "r", callId, slot, "u", attempt));
          const parsed = parseHandle(handle);
          expect(parsed).toEqual({
            callId,
            ...(slot === undefined ? {} : { slot }),
            ...(attempt === undefined ? {} : { attempt }),
          });
          // Every key stays inside every store's bounds, digested segments included.
          for (const key of [recordKey("t", "r", handle), blobKey("t", "r", callId, slot, "u")]) {
            expect(key.length).toBeLessThan(1024);
            for (const part of key.split("/")) expect(part.length).toBeLessThanOrEqual(205);
          }
        }
      }
    }
    expect(handles.size).toBe(n);
    expect(records.size).toBe(n);
    expect(blobs.size).toBe(n);
  });

  it("keep the first attempt's record and blob keys exactly as they were", () => {
    expect(recordKey("t", "r", "res_x")).toBe("t/t/r/r/h/res_x");
    expect(recordKey("t", "r", "res@2_x")).toBe("t/t/r/r/h/res_x!0002");
    expect(recordKey("t", "r", "out@1000_x_stdout")).toBe("t/t/r/r/h/out_x_stdout!1000");
    expect(blobKey("t", "r", "x", "stdout", "u")).toBe("t/t/r/r/b/x.stdout/u");
    expect(blobKey("t", "r", "x", "stdout", "u", 1)).toBe("t/t/r/r/b/x.stdout/u");
    expect(blobKey("t", "r", "x", "stdout", "u", 12)).toBe("t/t/r/r/b/x.stdout!0012/u");
    const long = `res_${"x".repeat(300)}`;
    const digest = recordKey("t", "r", long);
    expect(digest).toMatch(/\/h\/~[0-9a-f]{64}$/);
    expect(recordKey("t", "r", `res@7_${"x".repeat(300)}`)).toBe(`${digest}!0007`);
  });

  it("store forged retry handles where no record is ever written", () => {
    // `@` is always encoded, and no committed record has a retry handle that parseHandle refuses.
    expect(recordKey("t", "r", "res@1_x")).toBe("t/t/r/r/h/res%401_x");
    expect(recordKey("t", "r", "res@01_x")).toBe("t/t/r/r/h/res%4001_x");
  });

  it("list each output's attempts together, first attempt first, in attempt order", () => {
    const keys: { key: string; callId: string; slot: string | undefined; attempt: number }[] = [];
    for (const callId of callIds) {
      for (const slot of slots) {
        for (const attempt of attempts) {
          keys.push({
            key: recordKey("t", "r", handleFor(callId, slot, attempt)),
            callId,
            slot,
            attempt: attempt ?? 1,
          });
        }
      }
    }
    const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
    keys.sort((a, b) => byBytes(a.key, b.key));
    // Each output's entries are one contiguous run, ordered by attempt.
    const seen = new Set<string>();
    let previous: string | undefined;
    let lastAttempt = 0;
    for (const k of keys) {
      const output = JSON.stringify([k.callId, k.slot ?? null]);
      if (output !== previous) {
        expect(seen.has(output), `${output} appears in two places`).toBe(false);
        seen.add(output);
        previous = output;
        expect(k.attempt).toBe(1);
      } else {
        expect(k.attempt).toBeGreaterThan(lastAttempt);
      }
      lastAttempt = k.attempt;
    }
  });
});

describe("recordNameOfKey", () => {
  it("names the output a registry key holds, attempts and undecodable ones included", () => {
    expect(recordNameOfKey(recordKey("t1", "run", "res_c7"))).toBe('"res_c7"');
    expect(recordNameOfKey(recordKey("t1", "run", "res@2_c7"))).toBe('"res_c7" attempt 2');
    expect(recordNameOfKey(recordKey("t1", "run", "res_a/b c"))).toBe('"res_a/b c"');
    expect(recordNameOfKey(recordKey("t1", "run", `res_${"x".repeat(300)}`))).toBe(
      "an output with a long handle",
    );
  });
});
