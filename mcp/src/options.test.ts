import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../test/support/scratch-dir.js";
import { parseMcpOptions } from "./options.js";

describe("spillway-mcp options", () => {
  const dir = scratchDir("spillway-mcp-options-");

  it("defaults to stdio, loopback and the local service", () => {
    expect(parseMcpOptions([], {})).toEqual({
      spillwayUrl: "http://127.0.0.1:50051",
      token: undefined,
      runId: undefined,
      transport: "stdio",
      host: "127.0.0.1",
      port: 3334,
      timeoutMs: 30_000,
    });
  });

  it("reads the environment, and a flag wins over its variable", () => {
    const env = {
      SPILLWAY_URL: "http://env:1",
      SPILLWAY_TOKEN: "env-token",
      SPILLWAY_RUN_ID: "env-run",
      SPILLWAY_MCP_TRANSPORT: "http",
      SPILLWAY_MCP_PORT: "4000",
    };
    expect(parseMcpOptions([], env)).toMatchObject({
      spillwayUrl: "http://env:1",
      token: "env-token",
      runId: "env-run",
      transport: "http",
      port: 4000,
    });
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "file-token\n");
    expect(
      parseMcpOptions(
        ["--url", "http://flag:2", "--run", "flag-run", "--token-file", tokenFile, "--port", "0"],
        env,
      ),
    ).toMatchObject({
      spillwayUrl: "http://flag:2",
      runId: "flag-run",
      token: "file-token",
      port: 0,
    });
  });

  it.each([
    [["--transport", "sse"], /--transport: expected stdio or http/],
    [["--port", "70000"], /--port: expected 0 to 65535/],
    [["--port", ""], /--port/],
    [["--timeout-ms", "1e3"], /--timeout-ms/],
    [["--bogus"], /bogus/],
    [["--token-file", "/nonexistent/spillway-token"], /--token-file: /],
  ])("refuses %j as a usage error naming the flag", (argv, problem) => {
    const parsed = parseMcpOptions(argv, {});
    expect(parsed).toHaveProperty("usageError");
    expect((parsed as { usageError: string }).usageError).toMatch(problem);
  });

  it("answers --help", () => {
    expect(parseMcpOptions(["-h"], {})).toBe("help");
  });
});
