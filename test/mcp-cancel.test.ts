import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createSpillwayClient } from "@spillway/client";
import { createSpillwayResources, createSpillwayToolHandler } from "@spillway/mcp";
import { describe, expect, it } from "vitest";
import { startSilentServer } from "./support/silent-server.js";

/** Resolves with how long `pending` took to settle, and its value or error. */
async function timed(pending: Promise<unknown>) {
  const started = performance.now();
  try {
    return { value: await pending, ms: performance.now() - started };
  } catch (err) {
    return { err, ms: performance.now() - started };
  }
}

/**
 * spillway-mcp's tool and resource handlers against a Spillway that accepts connections and
 * never answers: a host's cancel (the signal the MCP SDK gives each request's handler) ends the
 * service call at once, rather than after the handler's 60 s deadline.
 */
describe("spillway-mcp handlers cancelled by the host", () => {
  const cases = [
    ["read_tool_output", { run_id: "r", handle: "res_x" }],
    ["list_tool_outputs", { run_id: "r" }],
    ["list_runs", {}],
    ["stat_tool_output", { run_id: "r", handle: "res_x" }],
  ] as const;

  it.each(cases)("%s ends with CANCELED once its signal aborts", async (tool, args) => {
    const silent = await startSilentServer();
    const handler = createSpillwayToolHandler(createSpillwayClient({ baseUrl: silent.url }), {
      timeoutMs: 60_000,
    });
    const cancel = new AbortController();
    const pending = timed(handler(tool, args, cancel.signal));
    await silent.reached;
    cancel.abort();
    const { value, ms } = await pending;
    expect((value as CallToolResult).isError).toBe(true);
    expect(JSON.stringify((value as CallToolResult).content)).toMatch(
      /grpc-status: 1 \(CANCELED\)/,
    );
    expect(ms).toBeLessThan(30_000);
    await silent.close();
  });

  it.each(["read", "list"] as const)("a resources/%s ends once its signal aborts", async (what) => {
    const silent = await startSilentServer();
    const resources = createSpillwayResources(createSpillwayClient({ baseUrl: silent.url }), {
      runId: "r",
      timeoutMs: 60_000,
    });
    const cancel = new AbortController();
    const pending = timed(
      what === "read"
        ? resources.read("spillway://r/res_x", cancel.signal)
        : resources.list(undefined, cancel.signal),
    );
    await silent.reached;
    cancel.abort();
    const { err, ms } = await pending;
    expect(err).toBeDefined();
    expect(ms).toBeLessThan(30_000);
    await silent.close();
  });
});
