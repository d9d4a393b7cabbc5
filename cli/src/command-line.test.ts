import { describe, expect, it } from "vitest";
import { expectArgs, findCommand, parseCommandLine, wholeFlag } from "./command-line.js";
import { isUsageError } from "./exit-codes.js";

const tailOptions = {
  lines: { type: "string", short: "n" },
  bytes: { type: "string", short: "c" },
} as const;

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
}

describe("the command line", () => {
  it("finds the command after global flags and their values", () => {
    expect(findCommand(["cat", "r", "h"])).toBe(0);
    expect(findCommand(["--url", "http://x", "--json", "cat", "r"])).toBe(3);
    expect(findCommand(["--url=http://x", "ls", "r"])).toBe(1);
    expect(findCommand(["--token-file", "t", "-h"])).toBe(-1);
  });

  it("takes global flags before and after the command, with the command's own flags", () => {
    const parsed = parseCommandLine(
      ["--url", "http://x", "tail", "-n", "+5", "run", "--json", "res_a"],
      () => tailOptions,
    );
    expect(parsed.command).toBe("tail");
    expect(parsed.positionals).toEqual(["run", "res_a"]);
    expect(parsed.values).toMatchObject({ url: "http://x", lines: "+5", json: true });
  });

  it("reads a lone - as an argument (stdin for put)", () => {
    expect(parseCommandLine(["put", "run", "-"], () => ({})).positionals).toEqual(["run", "-"]);
  });

  it("throws a usage error for a flag the command does not take", () => {
    const err = thrown(() => parseCommandLine(["ls", "-n", "3", "run"], () => ({})));
    expect(isUsageError(err)).toBe(true);
  });

  it("checks argument counts and whole numbers, naming what is wrong", () => {
    expect(expectArgs("put", ["run"], ["<run>", "[<file>]"])).toEqual(["run"]);
    expect(thrown(() => expectArgs("stat", ["run"], ["<run>", "<handle>"]))).toEqual({
      usageError: 'stat: expected <run> <handle>, got "run"',
    });
    expect(wholeFlag({ n: "12" }, "n", 10)).toBe(12);
    expect(wholeFlag({}, "n", 10)).toBe(10);
    expect(thrown(() => wholeFlag({ n: "1e3" }, "n", 10))).toEqual({
      usageError: '-n: expected a whole number, got "1e3"',
    });
  });
});
