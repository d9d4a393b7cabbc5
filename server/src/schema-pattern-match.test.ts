import { type DescMessage, getOption, hasOption } from "@bufbuild/protobuf";
import { field as fieldRules } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { file_spillway_v1_spillway } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { file_spillway_v1_types } from "@spillway/proto/spillway/v1/types_pb.js";
import fc from "fast-check";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { schemaPatternMatch } from "./schema-pattern-match.js";

/** Every `string.pattern` rule the proto files declare, with the field that declares it. */
function declaredPatterns(): { field: string; pattern: string }[] {
  const found: { field: string; pattern: string }[] = [];
  const visit = (message: DescMessage) => {
    for (const field of message.fields) {
      if (!hasOption(field, fieldRules)) continue;
      const rules = getOption(field, fieldRules);
      if (rules.type.case === "string" && rules.type.value.pattern !== undefined) {
        found.push({ field: field.toString(), pattern: rules.type.value.pattern });
      }
    }
    for (const nested of message.nestedMessages) visit(nested);
  };
  for (const file of [file_spillway_v1_spillway, file_spillway_v1_types]) {
    for (const message of file.messages) visit(message);
  }
  return found;
}

/**
 * Characters where RegExp and RE2 could read a pattern differently: the classes' edges (C0
 * and C1 controls, DEL, NBSP), slashes and backslashes, line ends (`$` before a final newline),
 * letters of several cases, hex digits, a combining mark, characters outside the BMP (one code
 * point, two UTF-16 units) and the Unicode line separator.
 */
const edgeChars = [
  ..."abcfxyzABCFXYZ0189:._-/\\ \t\n\r",
  "\u0000",
  "\u001f",
  "\u007f",
  "\u0080",
  "\u009f",
  "\u00a0",
  "\u00e9",
  "\u0301",
  "\u2028",
  "\u{1f600}",
  "\u{10ffff}",
];

const edgeStrings = fc
  .array(fc.constantFrom(...edgeChars), { maxLength: 80 })
  .map((chars) => chars.join(""));

describe("schemaPatternMatch", () => {
  const patterns = declaredPatterns();

  it("finds the proto files' patterns", () => {
    // The key fields, the slot and the sha256 at least: a walk that finds none would test nothing.
    expect(patterns.length).toBeGreaterThanOrEqual(4);
    expect(patterns.map((p) => p.pattern)).toContain("^[0-9a-f]{64}$");
  });

  it.each(patterns)("agrees with RE2 on $field", ({ pattern }) => {
    const re2 = new RE2(pattern, "u");
    // What makes each pattern match too: a slot's `file:` prefix, a digest's 64 hex digits.
    const matching = fc.oneof(
      edgeStrings,
      edgeStrings.map((s) => `file:${s}`),
      fc.constantFrom("stdout", "value", "0".repeat(64), "a".repeat(64), `${"f".repeat(64)}\n`),
    );
    fc.assert(
      fc.property(matching, (text) => {
        expect(schemaPatternMatch(pattern, text)).toBe(re2.test(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it("matches by code point, as RE2 does", () => {
    // One code point outside the BMP is one character to RE2; without the u flag RegExp would
    // see two and `^.$` would fail.
    expect(schemaPatternMatch("^.$", "\u{1f600}")).toBe(true);
    expect(schemaPatternMatch("^[^\\x00-\\x1f]{2}$", "a\u{1f600}")).toBe(true);
  });

  it("matches RE2-only syntax with RE2", () => {
    // RegExp has no (?i) group flag; RE2 does.
    expect(schemaPatternMatch("^(?i)abc$", "ABC")).toBe(true);
    expect(schemaPatternMatch("^(?i)abc$", "abd")).toBe(false);
  });
});
