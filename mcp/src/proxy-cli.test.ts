import { describe, expect, it } from "vitest";
import { parseMcpProxyArgs } from "./proxy-cli.js";

describe("spillway-mcp-proxy arguments", () => {
  it("takes its flags before -- and the server's command line after it, untouched", () => {
    const parsed = parseMcpProxyArgs(
      ["--run", "r1", "--band", "500", "--", "npx", "server", "--run", "theirs", "--"],
      { SPILLWAY_TOKEN: "t", SPILLWAY_TENANT: "acme" },
    );
    expect(parsed).toMatchObject({
      runId: "r1",
      bandChars: 500,
      token: "t",
      tenant: "acme",
      command: "npx",
      args: ["server", "--run", "theirs", "--"],
    });
  });

  it("leaves the tenant to the service, a 20,000-character band and a fresh run per process", () => {
    const a = parseMcpProxyArgs(["--", "cmd"], {});
    const b = parseMcpProxyArgs(["--", "cmd"], {});
    expect(a).toMatchObject({ tenant: undefined, bandChars: 20_000, timeoutMs: 30_000 });
    expect((a as { runId: string }).runId).toMatch(/^mcp-proxy-[0-9a-f]{12}$/);
    expect((a as { runId: string }).runId).not.toBe((b as { runId: string }).runId);
  });

  it.each([
    [[], /no server command after --/],
    [["--band", "0", "--", "cmd"], /--band: expected a whole number above 0/],
    [["--band", "lots", "--", "cmd"], /--band/],
    [["--verbose", "--", "cmd"], /verbose/],
  ])("refuses %j naming the problem", (argv, problem) => {
    const parsed = parseMcpProxyArgs(argv, {});
    expect((parsed as { usageError: string }).usageError).toMatch(problem);
  });
});
