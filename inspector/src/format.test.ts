import { describe, expect, it } from "vitest";
import {
  codeName,
  formatBytes,
  hexRows,
  highlightSegments,
  isJsonType,
  prettyJson,
  visibleText,
} from "./format.js";

describe("the inspector's formatting", () => {
  it("names sizes with binary units, exact below 1 KiB", () => {
    expect([0, 1023, 1024, 1536, 10 * 1024 ** 2, 3 * 1024 ** 3].map(formatBytes)).toEqual([
      "0 B",
      "1023 B",
      "1.0 KiB",
      "1.5 KiB",
      "10 MiB",
      "3.0 GiB",
    ]);
    expect(formatBytes(1024n ** 4n)).toBe("1.0 TiB");
  });

  it("spells Connect codes as gRPC status names", () => {
    expect(
      ["Unauthenticated", "InvalidArgument", "NotFound", "ResourceExhausted"].map(codeName),
    ).toEqual(["UNAUTHENTICATED", "INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED"]);
  });

  it("dumps bytes as hexdump -C does: offset, two groups of 8, printable ASCII", () => {
    const bytes = Uint8Array.from([
      0x00,
      0x41,
      0x7e,
      0x7f,
      0xff,
      ..."hello, world!!".split("").map((c) => c.charCodeAt(0)),
      0x0a,
    ]);
    const rows = hexRows(bytes, 0x1000n);
    expect(rows).toEqual([
      {
        offset: "00001000",
        hex: "00 41 7e 7f ff 68 65 6c  6c 6f 2c 20 77 6f 72 6c",
        ascii: ".A~..hello, worl",
      },
      { offset: "00001010", hex: "64 21 21 0a".padEnd(48, " "), ascii: "d!!." },
    ]);
  });

  it("marks every literal match, case-insensitively when asked, covering the whole line", () => {
    const line = "ERROR: error in Error handler (1+1)";
    expect(highlightSegments(line, { pattern: "error", regex: false, ignoreCase: true })).toEqual([
      { text: "ERROR", match: true },
      { text: ": ", match: false },
      { text: "error", match: true },
      { text: " in ", match: false },
      { text: "Error", match: true },
      { text: " handler (1+1)", match: false },
    ]);
    // Regex metacharacters in a literal pattern are literal.
    expect(highlightSegments(line, { pattern: "(1+1)", regex: false, ignoreCase: false })).toEqual([
      { text: "ERROR: error in Error handler ", match: false },
      { text: "(1+1)", match: true },
    ]);
    expect(
      highlightSegments(line, { pattern: "[Ee]rr?or", regex: true, ignoreCase: false })
        .filter((s) => s.match)
        .map((s) => s.text),
    ).toEqual(["error", "Error"]);
  });

  it("leaves a line whole when the pattern matches nothing, is empty or does not compile here", () => {
    for (const spec of [
      { pattern: "absent", regex: false, ignoreCase: false },
      { pattern: "", regex: false, ignoreCase: false },
      { pattern: "(?P<name>x)", regex: true, ignoreCase: false },
    ]) {
      expect(highlightSegments("a line", spec)).toEqual([{ text: "a line", match: false }]);
    }
  });

  it("recognises JSON content types and pretty-prints JSON", () => {
    expect(
      [
        "application/json",
        "application/json; charset=utf-8",
        "application/vnd.api+json",
        "text/plain",
        "",
      ].map(isJsonType),
    ).toEqual([true, true, true, false, false]);
    expect(prettyJson('{"a":[1,{"b":null}]}')).toBe(
      '{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ]\n}',
    );
    expect(() => prettyJson("{not json")).toThrow(SyntaxError);
  });

  it("shows control and bidi formatting characters as code points, keeping all else", () => {
    expect(visibleText("\u202Egnp.exe")).toBe("<U+202E>gnp.exe");
    expect(visibleText("\u001b[31mred\u001b[0m")).toBe("<U+001B>[31mred<U+001B>[0m");
    expect(visibleText("a\u2066b\u2069\u200f\u061c\u0085\u007f\n")).toBe(
      "a<U+2066>b<U+2069><U+200F><U+061C><U+0085><U+007F><U+000A>",
    );
    expect(visibleText("tab\there · ünï cødé 日本 🙂 <b>&amp;")).toBe(
      "tab\there · ünï cødé 日本 🙂 <b>&amp;",
    );
  });
});
