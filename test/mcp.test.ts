import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  getDefaultEnvironment,
  StdioClientTransport,
} from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  createReadToolOutputExecutor,
  createSpillwayClient,
  type SpillwayClient,
} from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPipeHost } from "./support/mcp-pipe-host.js";
import { spillwayMcp } from "./support/package-bins.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const token = "mcp-test-token";
const tenant = "mcp-tenant";
const runId = "run-mcp";
const maxWindowLines = 400;
/** 20,000 numbered lines, about 1.2 MB: 50 windows at the cap. */
const lineCount = 20_000;
const payload = Array.from(
  { length: lineCount },
  (_, i) => `line ${i + 1} ${i % 97 === 0 ? "NEEDLE" : "hay"} ${"x".repeat(40)}`,
).join("\n");

/** The single text content of a tool result. */
function textOf(result: unknown): string {
  const content = (result as CallToolResult).content;
  expect(content).toHaveLength(1);
  const [first] = content;
  if (first?.type !== "text") throw new Error(`expected text content, got ${first?.type}`);
  return first.text;
}

/**
 * The MCP server (`spillway-mcp`, the @spillway/mcp bin) as an MCP host meets it: the MCP
 * SDK's own Client spawns it over stdio, or connects to it over Streamable HTTP, in front of a
 * real `spillway serve` that wants a bearer token (given to the MCP server only through
 * SPILLWAY_TOKEN). Every read through MCP is compared byte for byte with what the SDK's
 * `read_tool_output` executor returns for the same arguments.
 */
describe("spillway-mcp in front of spillway serve", () => {
  const dir = scratchDir("spillway-mcp-");
  let spillway: SpillwayProcess;
  let sdk: SpillwayClient;
  let sdkTool: (args: unknown) => Promise<string>;

  beforeAll(async () => {
    const tokenFile = join(dir, "tokens");
    writeFileSync(tokenFile, `${createHash("sha256").update(token).digest("hex")} ${tenant}\n`);
    spillway = await spawnSpillway([
      "--backend",
      "memory",
      "--token-file",
      tokenFile,
      "--max-window-lines",
      String(maxWindowLines),
    ]);
    sdk = createSpillwayClient({ baseUrl: spillway.url, token });
    sdkTool = createReadToolOutputExecutor(sdk, { runId });
    await sdk.offload({ tenant, runId, callId: "big" }, payload, { contentType: "text/plain" });
    await sdk.offload({ tenant, runId, callId: "doc" }, '{"a": 1}\n', {
      contentType: "application/json",
    });
  });
  afterAll(() => spillway?.stop());

  describe("over stdio", () => {
    let client: Client;
    let transport: StdioClientTransport;

    beforeAll(async () => {
      transport = new StdioClientTransport({
        command: process.execPath,
        args: [spillwayMcp, "--url", spillway.url, "--run", runId],
        env: { ...getDefaultEnvironment(), SPILLWAY_TOKEN: token },
        stderr: "inherit",
      });
      client = new Client({ name: "spillway-test-host", version: "1.0.0" });
      await client.connect(transport);
    });
    afterAll(() => client?.close());

    it("lists the four tools, read_tool_output with the SDK tool's arguments and run_id", async () => {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        "list_runs",
        "list_tool_outputs",
        "read_tool_output",
        "stat_tool_output",
      ]);
      const read = tools.find((t) => t.name === "read_tool_output");
      expect(Object.keys(read?.inputSchema.properties ?? {}).sort()).toEqual(
        [
          "bytes",
          "context",
          "from_end",
          "handle",
          "ignore_case",
          "json",
          "jsonpath",
          "keep_ansi",
          "limit",
          "mode",
          "offset",
          "pattern",
          "regex",
          "run_id",
          "skip",
        ].sort(),
      );
      expect(read?.inputSchema.required).toEqual(["handle"]);
    });

    it("reads a large output window by window, each window byte for byte the SDK tool's text", async () => {
      const stat = JSON.parse(
        textOf(
          await client.callTool({ name: "stat_tool_output", arguments: { handle: "res_big" } }),
        ),
      ) as { line_count: number; size_bytes: number; content_type: string; uri: string };
      expect(stat).toMatchObject({
        line_count: lineCount,
        size_bytes: Buffer.byteLength(payload),
        content_type: "text/plain",
        uri: `spillway://${runId}/res_big`,
      });
      let windows = 0;
      let joined = "";
      let last = "";
      for (let offset = 0; offset < stat.line_count; offset += maxWindowLines) {
        const args = { handle: "res_big", offset, limit: 1000 };
        const viaMcp = await client.callTool({ name: "read_tool_output", arguments: args });
        expect(viaMcp.isError ?? false).toBe(false);
        const text = textOf(viaMcp);
        expect(text).toBe(await sdkTool(args));
        joined += text;
        last = text;
        windows += 1;
      }
      expect(windows).toBe(lineCount / maxWindowLines);
      // Every line came back once, in order, numbered like cat -n.
      for (const n of [1, 400, 401, 12_345, lineCount]) {
        expect(joined).toContain(`${n}\tline ${n} `);
      }
      // Each window but the last says where the next starts.
      expect(joined).toContain("more: offset=400]");
      expect(joined).toContain(`more: offset=${lineCount - maxWindowLines}]`);
      expect(last).not.toContain("more: offset=");
    });

    it("returns searches, tails, bytes and JSON windows exactly as the SDK tool renders them", async () => {
      for (const args of [
        { handle: "res_big", pattern: "NEEDLE", limit: 5, context: 1 },
        { handle: "res_big", pattern: "needle", ignore_case: true, skip: 5, limit: 5 },
        { handle: "res_big", pattern: "line 1[0-9]{4} NEEDLE", regex: true },
        { handle: "res_big", offset: 0, limit: 10, from_end: true },
        { handle: "res_big", bytes: true, offset: 100, limit: 200 },
        { handle: "res_doc", run_id: runId },
        { handle: "res_doc", jsonpath: "$.a" },
        { handle: "res_doc", json: true, limit: 3 },
        { handle: "res_doc", mode: "json", offset: 0, from_end: true },
      ]) {
        const viaMcp = await client.callTool({ name: "read_tool_output", arguments: args });
        const { run_id: _, ...sdkArgs } = args as Record<string, unknown>;
        expect(textOf(viaMcp), JSON.stringify(args)).toBe(await sdkTool(sdkArgs));
      }
    });

    it("lists the run's outputs as a tool and as resources, with the records' MIME types", async () => {
      const listed = JSON.parse(
        textOf(await client.callTool({ name: "list_tool_outputs", arguments: {} })),
      ) as { outputs: { handle: string; content_type: string }[]; next_page_token: string };
      expect(listed.outputs.map((o) => [o.handle, o.content_type]).sort()).toEqual([
        ["res_big", "text/plain"],
        ["res_doc", "application/json"],
      ]);
      expect(listed.next_page_token).toBe("");

      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(["spillway://{run}/{handle}"]);
      expect(resourceTemplates[0]?.description).toMatch(/bounded window/);

      const { resources } = await client.listResources();
      expect(resources.map((r) => [r.uri, r.mimeType]).sort()).toEqual([
        [`spillway://${runId}/res_big`, "text/plain"],
        [`spillway://${runId}/res_doc`, "application/json"],
      ]);
    });

    it("lists the tenant's runs with list_runs, a page at a time", async () => {
      await sdk.offload({ tenant, runId: "run-mcp-2", callId: "c" }, "second run\n");
      await sdk.forkRun(runId, "run-mcp-fork", { ttlSeconds: 600 });
      type Listed = {
        runs: {
          run_id: string;
          output_count: number;
          size_bytes: number;
          create_time: string;
          expire_time: string | null;
          parent_run_id: string;
        }[];
        next_page_token: string;
      };
      const all = JSON.parse(
        textOf(await client.callTool({ name: "list_runs", arguments: {} })),
      ) as Listed;
      const byId = new Map(all.runs.map((r) => [r.run_id, r]));
      expect([...byId.keys()].sort()).toEqual(["run-mcp", "run-mcp-2", "run-mcp-fork"]);
      expect(byId.get(runId)).toMatchObject({
        output_count: 2,
        size_bytes: Buffer.byteLength(payload) + Buffer.byteLength('{"a": 1}\n'),
        expire_time: null,
        parent_run_id: "",
      });
      expect(byId.get("run-mcp-fork")).toMatchObject({ parent_run_id: runId, output_count: 2 });
      expect(Date.parse(byId.get("run-mcp-fork")?.expire_time ?? "")).toBeGreaterThan(Date.now());
      expect(all.next_page_token).toBe("");

      const seen: string[] = [];
      let pageToken: string | undefined;
      do {
        const page = JSON.parse(
          textOf(
            await client.callTool({
              name: "list_runs",
              arguments: {
                page_size: 1,
                ...(pageToken === undefined ? {} : { page_token: pageToken }),
              },
            }),
          ),
        ) as Listed;
        expect(page.runs.length).toBeLessThanOrEqual(1);
        seen.push(...page.runs.map((r) => r.run_id));
        pageToken = page.next_page_token === "" ? undefined : page.next_page_token;
      } while (pageToken !== undefined);
      expect(seen.sort()).toEqual(["run-mcp", "run-mcp-2", "run-mcp-fork"]);

      for (const args of [{ page_size: 0 }, { page_token: "forged" }, { run_id: runId }]) {
        const refused = await client.callTool({ name: "list_runs", arguments: args });
        expect(refused.isError).toBe(true);
        expect(textOf(refused)).toMatch(/grpc-status: 3 \(INVALID_ARGUMENT\)$/);
      }
      await sdk.deleteRun("run-mcp-2");
      await sdk.deleteRun("run-mcp-fork");
    });

    it("reads a resource as one window bounded by the caps, the SDK tool's first window", async () => {
      const uri = `spillway://${runId}/res_big`;
      const { contents } = await client.readResource({ uri });
      expect(contents).toHaveLength(1);
      const text = (contents[0] as { text: string }).text;
      expect(text).toBe(await sdkTool({ handle: "res_big" }));
      expect(text).toContain(`${maxWindowLines}\tline ${maxWindowLines} `);
      expect(text).not.toContain(`${maxWindowLines + 1}\tline`);
      expect(text.length).toBeLessThan(Buffer.byteLength(payload) / 10);
    });

    it("answers bad input with tool errors naming the gRPC code, and keeps serving", async () => {
      // sdkText: the first line is the SDK tool's own text (the last case fails before it runs).
      const cases: { args: Record<string, unknown>; code: string; sdkText: boolean }[] = [
        // A handle the run never recorded: invalid_deferred_handle, PERMISSION_DENIED.
        { args: { handle: "res_nothing_here" }, code: "7 (PERMISSION_DENIED)", sdkText: true },
        { args: { handle: "res_big", offset: -1 }, code: "3 (INVALID_ARGUMENT)", sdkText: true },
        { args: { handle: "res_big", colour: "red" }, code: "3 (INVALID_ARGUMENT)", sdkText: true },
        { args: { handle: "res_big", regex: true }, code: "3 (INVALID_ARGUMENT)", sdkText: true },
        {
          args: { handle: "res_big", pattern: "(", regex: true },
          code: "3 (INVALID_ARGUMENT)",
          sdkText: true,
        },
        { args: { handle: "res_big", run_id: "" }, code: "3 (INVALID_ARGUMENT)", sdkText: false },
      ];
      for (const { args, code, sdkText } of cases) {
        const result = await client.callTool({ name: "read_tool_output", arguments: args });
        expect(result.isError, JSON.stringify(args)).toBe(true);
        const text = textOf(result);
        expect(text, JSON.stringify(args)).toMatch(/^error: /);
        expect(text.endsWith(`\ngrpc-status: ${code}`), text).toBe(true);
        if (sdkText) {
          const { run_id: _, ...sdkArgs } = args;
          expect(text.split("\n")[0]).toBe(await sdkTool(sdkArgs));
        }
      }
      const missing = await client.callTool({
        name: "stat_tool_output",
        arguments: { handle: "res_nothing_here" },
      });
      expect(missing.isError).toBe(true);
      expect(textOf(missing)).toMatch(/\ngrpc-status: 7 \(PERMISSION_DENIED\)$/);
      const badPage = await client.callTool({
        name: "list_tool_outputs",
        arguments: { page_size: "ten" },
      });
      expect(badPage.isError).toBe(true);
      expect(textOf(badPage)).toMatch(/grpc-status: 3 \(INVALID_ARGUMENT\)$/);
      const unknownTool = await client.callTool({ name: "delete_everything", arguments: {} });
      expect(unknownTool.isError).toBe(true);

      // The host's McpError prefixes "MCP error <code>: " once; the server's text follows.
      await expect(
        client.readResource({ uri: `spillway://${runId}/res_nothing_here` }),
      ).rejects.toMatchObject({
        code: -32002,
        message: expect.stringMatching(
          /^MCP error -32002: invalid_deferred_handle: .*grpc-status: 7 PERMISSION_DENIED\)$/,
        ),
      });

      // Still serving: a good read after all of that.
      const after = await client.callTool({
        name: "read_tool_output",
        arguments: { handle: "res_doc" },
      });
      expect(textOf(after)).toBe(await sdkTool({ handle: "res_doc" }));
    });
  });

  it("without SPILLWAY_TOKEN, reports the service's UNAUTHENTICATED as a tool error", async () => {
    const client = new Client({ name: "spillway-test-host", version: "1.0.0" });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [spillwayMcp, "--url", spillway.url, "--run", runId],
        env: getDefaultEnvironment(),
        stderr: "inherit",
      }),
    );
    try {
      const result = await client.callTool({
        name: "stat_tool_output",
        arguments: { handle: "res_big" },
      });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(/\ngrpc-status: 16 \(UNAUTHENTICATED\)$/);
    } finally {
      await client.close();
    }
  });

  it("answers every request it read before its stdin ended, then exits", async () => {
    // A host that writes its requests and closes stdin (a pipe, a script) still gets answers.
    const { exitCode, answers } = await runPipeHost(
      [spillwayMcp, "--url", spillway.url, "--run", runId],
      { ...getDefaultEnvironment(), SPILLWAY_TOKEN: token },
      { name: "read_tool_output", arguments: { handle: "res_big", limit: 3 } },
      "inherit",
    );
    expect(exitCode).toBe(0);
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(textOf(answers[1]?.result)).toBe(await sdkTool({ handle: "res_big", limit: 3 }));
  });

  describe("over Streamable HTTP", () => {
    let mcp: ChildProcess;
    let url: string;

    beforeAll(async () => {
      // No --run: every tool call names its run.
      mcp = spawn(
        process.execPath,
        [spillwayMcp, "--transport", "http", "--port", "0", "--url", spillway.url],
        { env: { ...process.env, SPILLWAY_TOKEN: token }, stdio: ["ignore", "inherit", "pipe"] },
      );
      url = await new Promise<string>((resolve, reject) => {
        let err = "";
        mcp.stderr?.on("data", (chunk: Buffer) => {
          err += chunk.toString();
          const found = /"url":"([^"]+)"/.exec(err)?.[1];
          if (found !== undefined) resolve(found);
        });
        mcp.once("exit", (code) => reject(new Error(`spillway-mcp exited (${code}): ${err}`)));
      });
    });
    afterAll(() => {
      mcp?.kill("SIGTERM");
    });

    it("listens on loopback and serves the same windows to a client that names the run", async () => {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const client = new Client({ name: "spillway-http-host", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      try {
        for (const offset of [0, 400, 19_600]) {
          const args = { handle: "res_big", offset };
          const result = await client.callTool({
            name: "read_tool_output",
            arguments: { ...args, run_id: runId },
          });
          expect(textOf(result)).toBe(await sdkTool(args));
        }
        const noRun = await client.callTool({
          name: "read_tool_output",
          arguments: { handle: "res_big" },
        });
        expect(noRun.isError).toBe(true);
        expect(textOf(noRun)).toMatch(/run_id[\s\S]*grpc-status: 3 \(INVALID_ARGUMENT\)$/);
        // Without a default run there is nothing to list, but the template reads any run.
        expect((await client.listResources()).resources).toEqual([]);
        const { contents } = await client.readResource({ uri: `spillway://${runId}/res_doc` });
        expect((contents[0] as { text: string }).text).toBe(await sdkTool({ handle: "res_doc" }));
      } finally {
        await client.close();
      }
    });

    it("refuses a Host header other than its loopback address (DNS rebinding)", async () => {
      // fetch() cannot set Host, so the request goes out through node:http.
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = request(url, {
          method: "POST",
          headers: {
            host: "evil.example",
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
        });
        req.once("response", (res) => {
          res.resume();
          resolve(res.statusCode);
        });
        req.once("error", reject);
        req.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }));
      });
      expect(status).toBe(403);
    });

    it("refuses a request from a web page that is not on a loopback origin", async () => {
      const list = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
      const post = (origin: string) =>
        fetch(url, {
          method: "POST",
          headers: {
            origin,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: list,
        }).then(async (res) => {
          await res.arrayBuffer();
          return res.status;
        });
      expect(await post("http://evil.example")).toBe(403);
      expect(await post("null")).toBe(403);
      expect(await post("http://localhost:6274")).toBe(200);
    });
  });
});
