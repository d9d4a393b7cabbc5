import { describe, expect, it } from "vitest";
import { countChars, truncateText } from "./truncate-text.js";

describe("countChars", () => {
  it("counts a surrogate pair as one character", () => {
    expect(countChars("a😀b")).toBe(3);
    expect(countChars("")).toBe(0);
  });
});

describe("truncateText", () => {
  const text = "0123456789abcdefghij";

  it("returns a text within budget unchanged", () => {
    expect(truncateText(text, "head+tail", 20)).toBe(text);
  });

  it("keeps the head, the tail or both, with a marker", () => {
    expect(truncateText(text, "head", 5)).toBe("01234\n[… 15 of 20 chars omitted …]");
    expect(truncateText(text, "tail", 5)).toBe("[… 15 of 20 chars omitted …]\nfghij");
    expect(truncateText(text, "head+tail", 5)).toBe("012\n[… 15 of 20 chars omitted …]\nij");
  });

  it("never splits a surrogate pair", () => {
    const emoji = "😀😀😀😀";
    expect(truncateText(emoji, "head", 1)).toBe("😀\n[… 3 of 4 chars omitted …]");
    expect(truncateText(emoji, "tail", 1)).toBe("[… 3 of 4 chars omitted …]\n😀");
  });
});
