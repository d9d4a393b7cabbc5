import { describe, expect, it } from "vitest";
import { suggestCommand } from "./command-suggestion.js";

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
