import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import { createReadToolOutputRunner, readToolOutputTool } from "./read-tool-output-tool.js";

describe("read_tool_output's jsonpath argument against a live server", () => {
  let t: TestServer;
  let client: SpillwayClient;
  const runId = "tool-jsonpath";
  const doc = {
    items: Array.from({ length: 5 }, (_, i) => ({ id: i, status: i % 2 ? "failed" : "ok" })),
  };

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
    await client.offload({ tenant: "dev", runId, callId: "api" }, JSON.stringify(doc), {
      contentType: "application/json",
    });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("declares the argument", () => {
    const params = readToolOutputTool.parameters as { properties: Record<string, unknown> };
    expect(params.properties.jsonpath).toMatchObject({ type: "string", minLength: 1 });
    expect(readToolOutputTool.description).toContain("jsonpath");
  });

  it("returns the server-rendered JSONPath window exactly, paged by skip and limit", async () => {
    const run = createReadToolOutputRunner(client, { runId });
    const query = "$.items[?@.status == 'failed'].id";
    const page = await run({ handle: "res_api", jsonpath: query, limit: 1, skip: 1 });
    expect(page.code).toBeUndefined();
    let rendered = "";
    for await (const frame of t.raw().readToolOutput({
      runId,
      handle: "res_api",
      window: { case: "jsonPath", value: { query, maxMatches: 1, skip: 1n } },
    })) {
      if (frame.frame.case === "trailer") rendered = frame.frame.value.rendered;
    }
    expect(page.text).toBe(rendered);
    expect(page.text).toBe(
      `[res_api] nodes 2-2 for JSONPath "${query}"\n$['items'][3]['id']\t3\n[more matches: skip=2]\n`,
    );
  });

  it("refuses a bad query with the server's position and other windows' arguments beside it", async () => {
    const run = createReadToolOutputRunner(client, { runId });
    const bad = await run({ handle: "res_api", jsonpath: "$.items[" });
    expect(bad.text).toMatch(/^error: invalid_argument: invalid JSONPath query at position 8/);
    const mixed = await run({ handle: "res_api", jsonpath: "$", pattern: "x" });
    expect(mixed.text).toBe(
      "error: jsonpath cannot be combined with pattern (use skip and limit to page nodes)",
    );
  });
});
