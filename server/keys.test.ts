import { describe, expect, it } from "vitest";
import { blobKey, decodeSegment, encodeSegment, handleFor, recordKey } from "./keys.js";

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
