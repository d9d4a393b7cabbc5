import { describe, expect, it } from "vitest";
import { decodeJsonString } from "./json-string.js";

const token = (json: string) => new TextEncoder().encode(json);

describe("decodeJsonString", () => {
  it("decodes escapes, UTF-8 and escaped lone surrogates as JSON.parse does", () => {
    for (const json of ['""', '"a\\"b\\\\c\\n"', '"é✓😀"', '"\\ud800x"', `"${"y".repeat(70)}"`]) {
      expect(decodeJsonString(token(json))).toBe(JSON.parse(json));
    }
  });

  it("returns the right text for short ASCII tokens however often they repeat or collide", () => {
    // Far more distinct tokens than intern slots, each decoded twice: a slot's earlier
    // occupant must never be returned for another token.
    const texts = Array.from({ length: 20_000 }, (_, i) => `k${(i * 7919).toString(36)}`);
    for (let round = 0; round < 2; round++) {
      for (const text of texts) expect(decodeJsonString(token(JSON.stringify(text)))).toBe(text);
    }
  });
});
