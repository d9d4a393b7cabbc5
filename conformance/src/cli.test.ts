import { describe, expect, it } from "vitest";
import { runCli, usage } from "./cli.js";

/** Runs the CLI with `argv`, collecting what it writes; never reaches a server. */
async function run(argv: readonly string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await runCli(argv, (line) => lines.push(line));
  return { code, out: lines.join("\n") };
}

describe("spillway-conformance --help", () => {
  it.each([
    { argv: ["--help"] },
    { argv: ["-h"] },
    { argv: ["--target", "http://127.0.0.1:1", "--help"] },
  ])("prints the usage and exits 0 for $argv", async ({ argv }) => {
    expect(await run(argv)).toEqual({ code: 0, out: usage });
  });

  it("still exits 2 with the usage on a usage error", async () => {
    const { code, out } = await run(["--bogus"]);
    expect(code).toBe(2);
    expect(out).toContain("Unknown option '--bogus'");
    expect(out).toContain(usage);
  });
});
