import fc from "fast-check";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { chunkExpression } from "./chunk-expression.js";

describe("chunkExpression", () => {
  it("widens each end-of-line $ and leaves escaped and bracketed ones alone", () => {
    const widened: [string, string][] = [
      ["foo$", "foo(?:\\r?$)"],
      ["^$", "^(?:\\r?$)"],
      ["a$|b$", "a(?:\\r?$)|b(?:\\r?$)"],
      ["\\$", "\\$"],
      ["\\\\$", "\\\\(?:\\r?$)"],
      ["[$]", "[$]"],
      ["[]$]$", "[]$](?:\\r?$)"],
      ["[^]$]$", "[^]$](?:\\r?$)"],
      ["[[:alpha:]$]$", "[[:alpha:]$](?:\\r?$)"],
      ["[\\]$]$", "[\\]$](?:\\r?$)"],
      ["x[0-9]+ms", "x[0-9]+ms"],
    ];
    expect(widened.map(([source]) => chunkExpression(source))).toEqual(
      widened.map(([, chunked]) => chunked),
    );
  });

  it("refuses what means something else over many lines", () => {
    for (const source of ["\\Afoo", "foo\\z", "(?-m)^foo", "(?i-m:foo)", "\\Q$\\E"]) {
      expect(chunkExpression(source)).toBeUndefined();
    }
  });

  it("finds a match starting in every line that matches alone, \\n or \\r\\n", () => {
    const words = ["a", "b", "$", "]", "[", "\r", " ", "x1", "\\"];
    const lineArb = fc.record({
      text: fc.array(fc.constantFrom(...words), { maxLength: 5 }).map((w) => w.join("")),
      end: fc.constantFrom("\n", "\r\n"),
    });
    const patterns = [
      "a$",
      "^$",
      "\\$$",
      "[$]$",
      "[]$]",
      "b\\s*$",
      "(a|b)$",
      "[^a]$",
      "a$|^b",
      "x1\\r?$",
      "[[:alpha:]]$",
      "\\\\$",
      "$",
      "a(?:$)",
      "(?m)b$",
    ];
    fc.assert(
      fc.property(
        fc.array(lineArb, { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        fc.constantFrom(...patterns),
        fc.boolean(),
        (lines, lastEnds, pattern, ignoreCase) => {
          const flags = ignoreCase ? "iu" : "u";
          const chunkSource = chunkExpression(pattern);
          expect(chunkSource).toBeDefined();
          const alone = new RE2(pattern, flags);
          const over = new RE2(chunkSource ?? "", `gm${flags}`);
          const chunk = lines
            .map((line, k) => line.text + (k < lines.length - 1 || lastEnds ? line.end : ""))
            .join("");
          const bytes = Buffer.from(chunk, "utf8");
          let start = 0;
          for (const [k, line] of lines.entries()) {
            const terminated = k < lines.length - 1 || lastEnds;
            const raw = Buffer.byteLength(line.text) + (terminated && line.end === "\r\n" ? 1 : 0);
            // As the line splitter delivers it: its `\n` and a `\r` ending it cut off.
            const content = bytes.subarray(start, start + raw);
            const tested = content.at(-1) === 13 ? content.subarray(0, -1) : content;
            if (alone.test(tested)) {
              over.lastIndex = start;
              const found = over.exec(bytes)?.index ?? -1;
              expect(found).toBeGreaterThanOrEqual(start);
              expect(found).toBeLessThanOrEqual(start + raw);
            }
            start += raw + (terminated ? 1 : 0);
          }
        },
      ),
      { numRuns: 3_000 },
    );
  });
});
