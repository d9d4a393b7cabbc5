import fc from "fast-check";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { requiredBranchLiterals, requiredLiterals } from "./required-literal.js";

describe("requiredLiterals", () => {
  it.each([
    [
      'user=u[0-9]+ msg="[a-z]+ [a-z]+ session token (expired|revoked) for [a-z]+"',
      [" session token ", "user=u", ' msg="', " for "],
    ],
    [
      "ERROR svc=[a-z]+ quota (exceeded|exhausted) tenant=t[0-9]+",
      ["ERROR svc=", " tenant=t", " quota "],
    ],
    ["abcd?", ["abc"]],
    ["hel\\.lo world", ["hel.lo world"]],
    ["\\bfoo\\b", ["foo"]],
    ["x{2}yyy", ["yyy"]],
    ["a{x}bc", ["a{x}bc"]],
    ["^timeout after [0-9]+ ms$", ["timeout after ", " ms"]],
    ["(?:abc)+ defg.*", [" defg"]],
    ["naïve café+s", ["naïve caf"]],
  ])("finds the texts every match of %j holds: %j", (pattern, literals) => {
    expect(requiredLiterals(pattern)).toEqual(literals);
  });

  it.each([
    ["top-level alternation", "quota exceeded|quota exhausted"],
    ["an inline flag group", "(?i)session token"],
    ["an escape it does not follow", "\\x41BCDEF"],
    ["a quoted literal", "\\Qa|b\\E and more"],
    ["a run too short", "ab[0-9]cd"],
    ["a character lost to its quantifier", "abc+"],
  ])("names none for %s", (_why, pattern) => {
    expect(requiredLiterals(pattern)).toEqual([]);
  });

  it("names only texts that every line the expression matches contains", () => {
    // Expressions built from literal words, classes, groups with alternatives, quantifiers,
    // anchors and escapes, tried on lines made of the same words.
    const words = ["ab", "abc", "token", "expired", "x", "a.b", "é"];
    const atom = fc.oneof(
      fc.constantFrom(...words),
      fc.constantFrom("[a-z]", "[^x]", "[]a]", "\\d", "\\w", ".", "\\.", "\\bab", " "),
      fc
        .array(fc.constantFrom(...words), { minLength: 1, maxLength: 3 })
        .map((alts) => `(${alts.join("|")})`),
    );
    const quantified = fc.tuple(atom, fc.constantFrom("", "", "", "*", "+", "?", "{2}", "{0,1}"));
    const expression = fc
      .tuple(
        fc.constantFrom("", "^"),
        fc.array(quantified, { minLength: 1, maxLength: 6 }),
        fc.constantFrom("", "$"),
      )
      .map(([start, parts, end]) => start + parts.map(([a, q]) => a + q).join("") + end);
    const line = fc
      .array(fc.constantFrom(...words, " ", "9", "a", "b", "c"), { maxLength: 12 })
      .map((w) => w.join(""));
    fc.assert(
      fc.property(expression, fc.array(line, { minLength: 1, maxLength: 20 }), (source, lines) => {
        let re: RE2;
        try {
          re = new RE2(source, "u");
        } catch {
          return;
        }
        const literals = requiredLiterals(source);
        for (const text of lines) {
          if (!re.test(text)) continue;
          for (const literal of literals) expect(text).toContain(literal);
        }
      }),
      { numRuns: 3000 },
    );
  });
});

describe("requiredBranchLiterals", () => {
  it.each([
    ["quota exceeded|quota exhausted", [["quota exceeded"], ["quota exhausted"]]],
    ["session token expired|(a|b)+ quota [0-9]+", [["session token expired"], [" quota "]]],
    ["[|]abc|x\\|yz|def", [["abc"], ["x|yz"], ["def"]]],
    ["abc(d|e)fgh", [["abc", "fgh"]]],
  ])("finds each alternative's texts in %j: %j", (pattern, branches) => {
    expect(requiredBranchLiterals(pattern)).toEqual(branches);
  });

  it.each([
    ["an empty alternative", "abc|"],
    ["an alternative without text", "abc|[0-9]+"],
    ["an inline flag group", "(?i)abc|def"],
    ["an unclosed group", "abc|(def"],
  ])("names none for %s", (_why, pattern) => {
    expect(requiredBranchLiterals(pattern)).toEqual([]);
  });

  it("names texts of which every line the expression matches holds one alternative's all", () => {
    const words = ["ab", "abc", "token", "expired", "x", "é"];
    const branch = fc
      .array(
        fc.oneof(
          fc.constantFrom(...words),
          fc.constantFrom("[a-z]", "\\d", ".", " ", "(ab|x)", "c?"),
        ),
        { minLength: 1, maxLength: 4 },
      )
      .map((parts) => parts.join(""));
    const expression = fc
      .array(branch, { minLength: 1, maxLength: 4 })
      .map((branches) => branches.join("|"));
    const line = fc
      .array(fc.constantFrom(...words, " ", "9", "a", "b", "c"), { maxLength: 12 })
      .map((w) => w.join(""));
    fc.assert(
      fc.property(expression, fc.array(line, { minLength: 1, maxLength: 20 }), (source, lines) => {
        const re = new RE2(source, "u");
        const branches = requiredBranchLiterals(source);
        if (branches.length === 0) return;
        for (const text of lines) {
          if (!re.test(text)) continue;
          const held = branches.some((literals) => literals.every((l) => text.includes(l)));
          expect(held, `${JSON.stringify(text)} against ${source}`).toBe(true);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
