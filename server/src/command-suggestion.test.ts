import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { argumentProblem, suggestCommand } from "./command-suggestion.js";

const commands = ["serve", "sweep", "help", "version", "mcp", "mcp-proxy"];

describe("suggestCommand", () => {
  it.each([
    ["server", "serve"],
    ["serv", "serve"],
    ["SERVE", "serve"],
    ["swep", "sweep"],
    ["sweeper", "sweep"],
    ["verison", "version"],
    ["mcp-prxy", "mcp-proxy"],
    ["hlep", "help"],
  ])("suggests %s → %s", (given, expected) => {
    expect(suggestCommand(given, commands)).toBe(expected);
  });

  it.each(["bogus", "x", "start", "list-everything"])("has no guess for %s", (given) => {
    expect(suggestCommand(given, commands)).toBeUndefined();
  });
});

describe("argumentProblem", () => {
  const flags = ["max-blob-bytes", "max-run-bytes", "data-dir", "port"];
  const problemOf = (args: string[]) => {
    try {
      parseArgs({ args, options: Object.fromEntries(flags.map((f) => [f, { type: "string" }])) });
    } catch (err) {
      return argumentProblem(err, flags);
    }
    return undefined;
  };

  it("names an unknown flag with the flag it most likely meant", () => {
    expect(problemOf(["--max-blob-byte", "5"])).toBe(
      'unknown flag "--max-blob-byte"; did you mean "--max-blob-bytes"?',
    );
    expect(problemOf(["--datadir", "x"])).toBe(
      'unknown flag "--datadir"; did you mean "--data-dir"?',
    );
    expect(problemOf(["--colour"])).toBe('unknown flag "--colour"');
  });

  it("keeps parseArgs' own words for other mistakes", () => {
    expect(problemOf(["--port"])).toMatch(/--port <value>' argument missing/);
  });
});
