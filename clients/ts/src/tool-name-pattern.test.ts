import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createToolFilter, matchesToolPattern, pickToolPattern } from "./tool-name-pattern.js";

describe("matchesToolPattern", () => {
  it.each([
    ["read_file", "read_file", true],
    ["read_file", "read_files", false],
    ["read_*", "read_file", true],
    ["read_*", "read_", true],
    ["*_log", "build_log", true],
    ["*_log", "build_log2", false],
    ["b*d*g", "build_log", true],
    ["b*d*x", "build_log", false],
    ["t?", "tx", true],
    ["t?", "t", false],
    ["t?", "txy", false],
    ["*", "", true],
    ["?", "😀", true],
    ["a**b", "ab", true],
    ["Read_File", "read_file", false],
  ])("%s against %s is %s", (pattern, name, want) => {
    expect(matchesToolPattern(pattern, name)).toBe(want);
  });
});

describe("pickToolPattern", () => {
  it("prefers the exact name, then the most literal characters, then the pattern sorting first", () => {
    expect(pickToolPattern(["build*", "build_log", "*"], "build_log")).toBe("build_log");
    expect(pickToolPattern(["*", "build_*", "*_log"], "build_log")).toBe("build_*");
    expect(pickToolPattern(["a?c", "?bc"], "abc")).toBe("?bc");
    expect(pickToolPattern(["?bc", "a?c"], "abc")).toBe("?bc");
    expect(pickToolPattern(["x*"], "abc")).toBeUndefined();
  });
});

describe("createToolFilter", () => {
  it("lets exclusion win over inclusion and matches a missing name as empty", () => {
    const f = createToolFilter(["*"], ["secret_*"]);
    expect(f.applies("build")).toBe(true);
    expect(f.applies("secret_env")).toBe(false);
    expect(f.applies(undefined)).toBe(true);
    expect(createToolFilter(["build"], undefined).applies(undefined)).toBe(false);
    expect(createToolFilter(undefined, undefined).applies("anything")).toBe(true);
  });

  it("refuses an empty include list and empty patterns", () => {
    for (const [include, exclude] of [
      [[], undefined],
      [[""], undefined],
      [undefined, [""]],
    ] as const) {
      const err = (() => {
        try {
          createToolFilter(include, exclude);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    }
  });
});
