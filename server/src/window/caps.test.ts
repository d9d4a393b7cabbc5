import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  clipString,
  clipUtf8,
  countChars,
  createWindowCaps,
  defaultWindowCaps,
  leadingContinuationBytes,
} from "./caps.js";

/** Returns the ConnectError code `fn` throws. */
function codeOf(fn: () => unknown): Code | undefined {
  try {
    fn();
  } catch (err) {
    return ConnectError.from(err).code;
  }
  return undefined;
}

describe("window caps", () => {
  it("defaults to the documented caps", () => {
    expect(defaultWindowCaps).toMatchObject({
      maxWindowLines: 1000,
      maxWindowChars: 50_000,
      maxLineChars: 2000,
      maxMatches: 100,
      maxBytesWindow: 4 * 1024 ** 3,
    });
  });

  it("refuses caps that are not positive, too many matches, or too narrow a window", () => {
    expect(codeOf(() => createWindowCaps({ maxWindowLines: 0 }))).toBe(Code.InvalidArgument);
    expect(codeOf(() => createWindowCaps({ maxMatches: 1001 }))).toBe(Code.InvalidArgument);
    expect(codeOf(() => createWindowCaps({ maxLineChars: 50_000 }))).toBe(Code.InvalidArgument);
    expect(createWindowCaps({ maxMatches: 1000 }).maxMatches).toBe(1000);
  });
});

describe("code point clipping", () => {
  it("counts code points, not UTF-16 units", () => {
    expect(countChars("a😀é")).toBe(3);
    expect(countChars("\uD800x")).toBe(2);
    expect(countChars("x\uDC00")).toBe(2);
    expect(countChars("ab\uD83D")).toBe(3);
    const row = `${String(7).padStart(6)}\t${"é😀".repeat(3)}\n`;
    expect(countChars(row)).toBe(14);
    expect(countChars("plain ascii")).toBe(11);
  });

  it("clips strings without leaving a lone surrogate", () => {
    expect(clipString("😀😀😀", 2)).toBe("😀😀");
    expect(clipString("ab", 5)).toBe("ab");
  });

  it("clips UTF-8 bytes on character boundaries", () => {
    const bytes = Buffer.from("a😀é");
    expect(clipUtf8(bytes, 2)).toEqual({ end: 5, chars: 2 });
    expect(clipUtf8(bytes, 10)).toEqual({ end: 7, chars: 3 });
    expect(clipUtf8(bytes.subarray(0, 3), 10)).toEqual({ end: 1, chars: 1 });
    expect(leadingContinuationBytes(bytes.subarray(2))).toBe(3);
    expect(leadingContinuationBytes(bytes)).toBe(0);
  });
});
