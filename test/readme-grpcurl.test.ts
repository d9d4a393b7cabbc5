import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";
import { grpcurlPath, runTool } from "./support/tools.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** The first ```sh block under the README heading `## <heading>`, as written. */
async function readmeBlock(heading: string): Promise<string> {
  const readme = await readFile(join(root, "README.md"), "utf8");
  const section = readme.split(/^## /m).find((s) => s.startsWith(`${heading}\n`));
  const block = section?.match(/```sh\n([\s\S]*?)```/)?.[1];
  if (block === undefined) throw new Error(`README.md has no sh block under "## ${heading}"`);
  return block;
}

/**
 * The README's grpcurl section, run as written right after the quick start: against the compiled
 * `spillway serve` on its default (dev mode, filesystem backend), with nothing but grpcurl and
 * curl on the PATH's usual places, no proto files and no `.deps/`. Only the address changes: the
 * test server listens on a free port, not 50051.
 */
describe("README: grpcurl and curl", () => {
  const dir = scratchDir("spillway-readme-grpcurl-");
  let server: SpillwayProcess | undefined;

  beforeAll(async () => {
    server = await spawnSpillway(["--data-dir", join(dir, "data")]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("runs the commands as written and gets the offload, the window and the server info", async () => {
    const block = await readmeBlock("grpcurl and curl");
    expect(block).not.toMatch(/\.deps|-proto |-import-path/);
    const address = new URL(server?.url ?? "").host;
    const script = block.replaceAll("127.0.0.1:50051", address);
    const run = await runTool(
      "bash",
      ["-c", `set -euo pipefail\nexport PATH="${dirname(grpcurlPath())}:$PATH"\n${script}`],
      { timeoutMs: 60_000 },
    );
    expect(run.code, run.stderr).toBe(0);
    // list
    expect(run.stdout).toContain("spillway.v1.SpillwayService\n");
    expect(run.stdout).toContain("grpc.health.v1.Health\n");
    // Offload
    expect(run.stdout).toContain('"handle": "res_call-2"');
    // ReadToolOutput: lines 2-3 of alpha, beta, gamma
    expect(run.stdout).toMatch(/"rendered": "[^"]*lines 2-3 of 3[^"]*beta[^"]*gamma/);
    // curl's GetServerInfo over HTTP/1.1
    expect(run.stdout).toMatch(/\{"version":"[^"]+","backend":"filesystem"/);
  });
});
