import { execFile } from "node:child_process";
import { dirname } from "node:path";
import { promisify } from "node:util";
import {
  createReadToolOutputExecutor,
  createSpillwayClient,
  type SpillwayClient,
} from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageFile, spillwayMcp } from "./support/package-bins.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** The MCP Inspector's command-line client, as its package's bin names it. */
const inspectorCli = packageFile("@modelcontextprotocol/inspector-cli", "build/cli.js");

const runId = "run-inspector";
const payload = Array.from({ length: 5_000 }, (_, i) => `inspector line ${i + 1}`).join("\n");

/**
 * inspect runs the Inspector CLI against `spillway-mcp` over stdio (the CLI spawns it) with
 * one method and its options, and returns the JSON it prints.
 */
async function inspect(url: string, ...method: string[]): Promise<unknown> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [inspectorCli, "--cli", process.execPath, spillwayMcp, "--url", url, "--run", runId, ...method],
    // The CLI looks for its own package.json at ../package.json from its working directory.
    { cwd: dirname(inspectorCli), maxBuffer: 16 * 1024 * 1024 },
  );
  // The CLI prints a deprecation notice before the result; the result is the JSON object.
  return JSON.parse(stdout.slice(stdout.indexOf("{")));
}

/**
 * `spillway-mcp` as the MCP Inspector's CLI (`@modelcontextprotocol/inspector-cli`, a client
 * nobody here wrote) meets it: it lists the tools and resource templates and calls
 * `read_tool_output`, whose text must be the SDK tool's, byte for byte.
 */
describe("spillway-mcp under the MCP Inspector CLI", () => {
  let spillway: SpillwayProcess;
  let sdk: SpillwayClient;
  let handle: string;

  beforeAll(async () => {
    spillway = await spawnSpillway(["--backend", "memory"]);
    sdk = createSpillwayClient({ baseUrl: spillway.url });
    ({ handle } = await sdk.offload({ tenant: "dev", runId, callId: "inspected" }, payload));
  });
  afterAll(() => spillway?.stop());

  it("lists the four tools", async () => {
    const out = (await inspect(spillway.url, "--method", "tools/list")) as {
      tools: { name: string }[];
    };
    expect(out.tools.map((t) => t.name).sort()).toEqual([
      "list_runs",
      "list_tool_outputs",
      "read_tool_output",
      "stat_tool_output",
    ]);
  });

  it("lists the spillway:// resource template", async () => {
    const out = (await inspect(spillway.url, "--method", "resources/templates/list")) as {
      resourceTemplates: { uriTemplate: string }[];
    };
    expect(out.resourceTemplates.map((t) => t.uriTemplate)).toEqual(["spillway://{run}/{handle}"]);
  });

  it("calls read_tool_output and gets the SDK tool's text", async () => {
    const out = (await inspect(
      spillway.url,
      "--method",
      "tools/call",
      "--tool-name",
      "read_tool_output",
      "--tool-arg",
      `handle=${handle}`,
      "offset=2500",
      "limit=3",
    )) as { content: { type: string; text: string }[]; isError?: boolean };
    const expected = await createReadToolOutputExecutor(sdk, { runId })({
      handle,
      offset: 2500,
      limit: 3,
    });
    expect(out.isError ?? false).toBe(false);
    expect(out.content).toEqual([{ type: "text", text: expected }]);
    expect(expected).toContain("inspector line 2501");
  });
});
