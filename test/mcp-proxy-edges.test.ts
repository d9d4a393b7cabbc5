import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { type McpProxyOptions, startMcpProxy } from "@spillway/mcp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startSilentServer } from "./support/silent-server.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const band = 1_000;
const runId = "run-edges";
const big = Array.from({ length: 2_000 }, (_, i) => `line ${i + 1} ${"x".repeat(40)}`).join("\n");

type Answer = (request: {
  id: string | number;
  method: string;
  params?: unknown;
}) => Record<string, unknown> | undefined;

/**
 * A wrapped MCP server speaking raw JSON-RPC on an in-memory wire: `answer` gives each
 * request's result (or nothing, for no reply), so a test can send what the SDK's own server
 * never would but a server in the wild may. `after` runs once each reply is sent;
 * `capabilities` are what its `initialize` result declares (default: tools only).
 */
function rawServer(
  answer: Answer,
  after?: (wire: InMemoryTransport, method: string) => void,
  capabilities: Record<string, unknown> = { tools: {} },
) {
  const [proxySide, serverSide] = InMemoryTransport.createLinkedPair();
  serverSide.onmessage = (message: JSONRPCMessage) => {
    if (!("method" in message) || !("id" in message)) return;
    const m = message as { id: string | number; method: string; params?: unknown };
    const result =
      m.method === "initialize"
        ? {
            protocolVersion: (m.params as { protocolVersion: string }).protocolVersion,
            capabilities,
            serverInfo: { name: "raw", version: "1.0.0" },
          }
        : answer(m);
    if (result === undefined) return;
    void serverSide
      .send({ jsonrpc: "2.0", id: m.id, result })
      .then(() => after?.(serverSide, m.method));
  };
  return { proxySide, serverSide };
}

/** Proxy options a test may set: its warnings' sink and the Spillway calls' deadline. */
type ProxyExtras = Partial<Pick<McpProxyOptions, "warn" | "timeoutMs">>;

/** Starts the proxy in process between a host wire and `server`, against `client`. */
async function startBetween(
  client: SpillwayClient,
  server: ReturnType<typeof rawServer>,
  extras: ProxyExtras = {},
) {
  const [hostSide, proxyHostSide] = InMemoryTransport.createLinkedPair();
  await server.serverSide.start();
  const proxy = await startMcpProxy({
    client,
    tenant: "dev",
    runId,
    bandChars: band,
    host: proxyHostSide,
    child: server.proxySide,
    timeoutMs: 5_000,
    ...extras,
  });
  return { hostSide, proxy };
}

/** Starts the proxy in process between an SDK Client and `server`, against `client`. */
async function proxied(
  client: SpillwayClient,
  server: ReturnType<typeof rawServer>,
  extras: ProxyExtras = {},
) {
  const { hostSide, proxy } = await startBetween(client, server, extras);
  const host = new Client({ name: "edge-host", version: "1.0.0" });
  await host.connect(hostSide);
  return { host, proxy };
}

/**
 * Starts the proxy between a raw JSON-RPC host wire and `server`: `seen` collects every
 * message the host receives, in order, for tests about what the SDK's Client would hide.
 */
async function rawHost(
  client: SpillwayClient,
  server: ReturnType<typeof rawServer>,
  extras: ProxyExtras = {},
) {
  const { hostSide, proxy } = await startBetween(client, server, extras);
  const seen: JSONRPCMessage[] = [];
  hostSide.onmessage = (m) => seen.push(m);
  await hostSide.start();
  return { hostSide, proxy, seen };
}

function text(result: unknown, index = 0): string {
  return ((result as CallToolResult).content[index] as { text: string }).text;
}

/**
 * spillway-mcp-proxy against wrapped servers that do what the reference servers do not: a
 * result without `content`, a paginated tool list, an exit right after a large result, and a
 * Spillway that cannot be reached. The host is the MCP SDK's Client; Spillway is a real
 * dev-mode `spillway serve`.
 */
describe("spillway-mcp-proxy at the edges of the protocol", () => {
  let spillway: SpillwayProcess;
  let sdk: SpillwayClient;

  beforeAll(async () => {
    spillway = await spawnSpillway(["--backend", "memory"]);
    sdk = createSpillwayClient({ baseUrl: spillway.url });
  });
  afterAll(async () => {
    await spillway?.stop();
  });

  it("stores structured content over the band from a result that has no content array", async () => {
    const structured = { s: big };
    const server = rawServer((m) =>
      m.method === "tools/call" ? { structuredContent: structured } : { tools: [] },
    );
    const { host, proxy } = await proxied(sdk, server);
    const result = (await host.callTool({ name: "only-structured" })) as CallToolResult;
    expect(result.structuredContent).toBeUndefined();
    const link = result.content[1] as { type: string; name: string; mimeType: string };
    expect(link).toMatchObject({ type: "resource_link", mimeType: "application/json" });
    const stat = await sdk.stat(runId, link.name);
    expect(stat.sha256).toBe(createHash("sha256").update(JSON.stringify(structured)).digest("hex"));
    await proxy.close();
  });

  it("stores an embedded text resource over the band, keeping the small text beside it", async () => {
    const server = rawServer((m) =>
      m.method === "tools/call"
        ? {
            content: [
              { type: "text", text: "small" },
              {
                type: "resource",
                resource: { uri: "file:///srv/big.log", mimeType: "text/x-log", text: big },
              },
            ],
          }
        : { tools: [] },
    );
    const { host, proxy } = await proxied(sdk, server);
    const result = (await host.callTool({ name: "embeds" })) as CallToolResult;
    expect(result.content.map((b) => b.type)).toEqual(["text", "text", "resource_link"]);
    expect(text(result)).toBe("small");
    const link = result.content[2] as { name: string; mimeType: string };
    expect(text(result, 1)).toContain(link.name);
    expect(link.mimeType).toBe("text/x-log");
    expect((await sdk.stat(runId, link.name)).sha256).toBe(
      createHash("sha256").update(big).digest("hex"),
    );
    await proxy.close();
  });

  it("leaves a server's own resources to it, and adds the spillway:// template and reads", async () => {
    const asked: string[] = [];
    const server = rawServer(
      (m) => {
        asked.push(m.method);
        if (m.method === "tools/call") return { content: [{ type: "text", text: big }] };
        if (m.method === "resources/list") {
          return { resources: [{ uri: "file:///srv/notes.txt", name: "notes" }] };
        }
        if (m.method === "resources/templates/list") {
          return { resourceTemplates: [{ uriTemplate: "file:///srv/{path}", name: "files" }] };
        }
        if (m.method === "resources/read") {
          const { uri } = m.params as { uri: string };
          return { contents: [{ uri, text: "the server's own notes" }] };
        }
        return { tools: [] };
      },
      undefined,
      { tools: {}, resources: { subscribe: true } },
    );
    const { host, proxy } = await proxied(sdk, server);
    expect(host.getServerCapabilities()?.resources).toEqual({ subscribe: true });
    expect((await host.listResources()).resources.map((r) => r.uri)).toEqual([
      "file:///srv/notes.txt",
    ]);
    expect(
      (await host.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
    ).toEqual(["file:///srv/{path}", "spillway://{run}/{handle}"]);
    expect(await host.readResource({ uri: "file:///srv/notes.txt" })).toEqual({
      contents: [{ uri: "file:///srv/notes.txt", text: "the server's own notes" }],
    });

    const link = (await host.callTool({ name: "big" })).content as { uri?: string }[];
    const uri = link[1]?.uri as string;
    const { contents } = await host.readResource({ uri });
    expect((contents[0] as { text: string }).text).toContain("1\tline 1 xxxx");
    // The spillway:// read never reached the server.
    expect(asked.filter((m) => m === "resources/read")).toHaveLength(1);
    await proxy.close();
  });

  it("answers every call whose result has a shape it cannot measure, instead of dropping it", async () => {
    // A null block, a resource block without its resource, structured content nested deeper
    // than JSON.stringify can go: each threw while measuring, and the call was never answered.
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const results: Record<string, Record<string, unknown>> = {
      "bad-null": { content: [null] },
      "bad-resource": { content: [{ type: "resource" }] },
      "bad-deep": { content: [{ type: "text", text: "small" }], structuredContent: { x: deep } },
      fine: { content: [{ type: "text", text: "ok" }] },
    };
    const server = rawServer((m) =>
      m.method === "tools/call" ? results[(m.params as { name: string }).name] : { tools: [] },
    );
    const { hostSide, proxy, seen } = await rawHost(sdk, server);
    const names = Object.keys(results);
    for (const [i, name] of names.entries()) {
      await hostSide.send({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name } });
    }
    await vi.waitUntil(() => seen.length === names.length, { timeout: 5_000, interval: 10 });
    const answered = seen.map((m) => ("id" in m ? m.id : undefined)).sort();
    expect(answered).toEqual([1, 2, 3, 4]);
    // Relayed as the server sent them.
    const byId = new Map(seen.map((m) => ["id" in m ? m.id : 0, m]));
    expect(byId.get(1)).toMatchObject({ result: results["bad-null"] });
    expect(byId.get(4)).toMatchObject({ result: results.fine });
    await proxy.close();
  });

  it("passes a result over the band through whole when Spillway cannot be reached", async () => {
    const down = createSpillwayClient({ baseUrl: "http://127.0.0.1:1" });
    const server = rawServer((m) =>
      m.method === "tools/call" ? { content: [{ type: "text", text: big }] } : { tools: [] },
    );
    const { host, proxy } = await proxied(down, server);
    const result = await host.callTool({ name: "big" });
    // Nothing lost: the host gets what it would have got without the proxy.
    expect(result).toEqual({ content: [{ type: "text", text: big }] });
    await proxy.close();
  });

  it("fixes every page of a paginated tools/list, not only the last", async () => {
    const server = rawServer((m) => {
      if (m.method !== "tools/list") return undefined;
      const cursor = (m.params as { cursor?: string } | undefined)?.cursor;
      if (cursor === undefined) {
        return {
          tools: [
            {
              name: "typed",
              inputSchema: { type: "object" },
              outputSchema: { type: "object", properties: { s: { type: "string" } } },
            },
            { name: "read_tool_output", inputSchema: { type: "object" } },
          ],
          nextCursor: "page-2",
        };
      }
      return { tools: [{ name: "plain", inputSchema: { type: "object" } }] };
    });
    const { host, proxy } = await proxied(sdk, server);
    const first = await host.listTools();
    const second = await host.listTools({ cursor: first.nextCursor as string });
    const all = [...first.tools, ...second.tools];
    expect(all.map((t) => t.name)).toEqual(["typed", "plain", "read_tool_output"]);
    expect(all.filter((t) => t.outputSchema !== undefined)).toEqual([]);
    await proxy.close();
  });

  it("delivers a large result the server sent just before it exited", async () => {
    const server = rawServer(
      (m) =>
        m.method === "tools/call" ? { content: [{ type: "text", text: big }] } : { tools: [] },
      (wire, method) => {
        if (method === "tools/call") void wire.close();
      },
    );
    const { host, proxy } = await proxied(sdk, server);
    const result = await host.callTool({ name: "last-words" });
    const link = (result as CallToolResult).content[1] as { name: string };
    expect(text(result)).toContain(link.name);
    expect((await sdk.stat(runId, link.name)).sha256).toBe(
      createHash("sha256").update(big).digest("hex"),
    );
    await proxy.closed;
  });

  it("answers the calls in flight with an error when the server exits without answering", async () => {
    const server = rawServer(
      (m) => (m.method === "tools/call" ? undefined : { tools: [] }),
      () => {},
    );
    server.serverSide.onmessage = ((previous) => (message: JSONRPCMessage) => {
      if ("method" in message && message.method === "tools/call") void server.serverSide.close();
      else previous?.(message);
    })(server.serverSide.onmessage);
    const { host, proxy } = await proxied(sdk, server);
    await expect(host.callTool({ name: "crashes" })).rejects.toThrow(
      /the wrapped MCP server exited before answering/,
    );
    await proxy.closed;
  });

  it("drops the server's late answer to a call the host cancelled", async () => {
    let answer: (() => void) | undefined;
    const server = rawServer((m) => {
      if (m.method !== "tools/call") return { tools: [] };
      // Answer only after the cancellation, as a server that ignores it would.
      answer = () =>
        void server.serverSide.send({
          jsonrpc: "2.0",
          id: m.id,
          result: { content: [{ type: "text", text: big }] },
        });
      return undefined;
    });
    const { hostSide, proxy, seen } = await rawHost(sdk, server);
    await hostSide.send({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "slow" } });
    await hostSide.send({
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: 7, reason: "the user gave up" },
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    answer?.();
    await hostSide.send({ jsonrpc: "2.0", id: 8, method: "tools/list" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The host hears about request 8 only; 7 was cancelled and nothing is spilled for it.
    expect(seen.map((m) => ("id" in m ? m.id : undefined))).toEqual([8]);
    await proxy.close();
  });

  it("forgets a call the host cancels while its result is stored in a Spillway that hangs", async () => {
    const silent = await startSilentServer();
    const server = rawServer((m) =>
      m.method === "tools/call" ? { content: [{ type: "text", text: big }] } : { tools: [] },
    );
    const warnings: string[] = [];
    // Without the cancel the offload would wait out this deadline, then pass the result through.
    const { host, proxy } = await proxied(createSpillwayClient({ baseUrl: silent.url }), server, {
      warn: (w) => warnings.push(w),
      timeoutMs: 60_000,
    });
    const stray: string[] = [];
    host.onerror = (err) => stray.push(err.message);
    const ac = new AbortController();
    const call = host.callTool({ name: "big" }, undefined, { signal: ac.signal });
    await silent.reached;
    ac.abort("the user gave up");
    await expect(call).rejects.toThrow(/the user gave up/);
    // The offload was aborted: the spill is over long before its deadline, and dropped.
    await vi.waitUntil(() => warnings.length > 0, { timeout: 2_000, interval: 10 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(warnings).toEqual([
      expect.stringMatching(
        /^dropped the server's answer to \d+: the host cancelled the call while its result was being stored$/,
      ),
    ]);
    expect(stray).toEqual([]);
    await proxy.close();
    await silent.close();
  });

  it("forgets a call the host cancels as the server answers it, and goes on relaying", async () => {
    const ac = new AbortController();
    const server = rawServer(
      (m) =>
        m.method === "tools/call" ? { content: [{ type: "text", text: big }] } : { tools: [] },
      // The host gives up just as the answer reaches the proxy, which starts storing it.
      (_wire, method) => {
        if (method === "tools/call" && !ac.signal.aborted) ac.abort("too late");
      },
    );
    const warnings: string[] = [];
    const { host, proxy } = await proxied(sdk, server, { warn: (w) => warnings.push(w) });
    const stray: string[] = [];
    host.onerror = (err) => stray.push(err.message);
    await expect(host.callTool({ name: "big" }, undefined, { signal: ac.signal })).rejects.toThrow(
      /too late/,
    );
    await vi.waitUntil(() => warnings.length > 0, { timeout: 5_000, interval: 10 });
    // The next call is stored and answered as usual, and nothing answers the cancelled one.
    const next = (await host.callTool({ name: "big" })) as CallToolResult;
    const link = next.content[1] as { name: string };
    expect((await sdk.stat(runId, link.name)).sha256).toBe(
      createHash("sha256").update(big).digest("hex"),
    );
    expect(warnings).toEqual([
      expect.stringMatching(/^dropped the server's answer to \d+: the host cancelled the call/),
    ]);
    expect(stray).toEqual([]);
    await proxy.close();
  });

  it("sends no answer to a read_tool_output call the host cancelled", async () => {
    const server = rawServer(() => ({ tools: [] }));
    const warnings: string[] = [];
    const { hostSide, proxy, seen } = await rawHost(sdk, server, { warn: (w) => warnings.push(w) });
    await hostSide.send({
      jsonrpc: "2.0",
      id: 5,
      method: "tools/call",
      params: { name: "read_tool_output", arguments: { handle: "res_none" } },
    });
    await hostSide.send({
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: 5, reason: "never mind" },
    });
    await hostSide.send({ jsonrpc: "2.0", id: 6, method: "tools/list" });
    await vi.waitUntil(() => warnings.length > 0 && seen.length > 0, { timeout: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen.map((m) => ("id" in m ? m.id : undefined))).toEqual([6]);
    expect(warnings).toEqual(["dropped the answer to 5: the host cancelled the call"]);
    await proxy.close();
  });

  it.each([
    ["tools/call", { name: "read_tool_output", arguments: { handle: "res_x" } }],
    ["resources/read", { uri: `spillway://${runId}/res_x` }],
  ])(
    "cancels its own %s read against a Spillway that hangs when the host cancels",
    async (method, params) => {
      const silent = await startSilentServer();
      const server = rawServer(() => ({ tools: [] }));
      const warnings: string[] = [];
      const { hostSide, proxy, seen } = await rawHost(
        createSpillwayClient({ baseUrl: silent.url }),
        server,
        // Without the cancel reaching the read, it would wait out this deadline.
        { warn: (w) => warnings.push(w), timeoutMs: 60_000 },
      );
      await hostSide.send({ jsonrpc: "2.0", id: 9, method, params });
      await silent.reached;
      await hostSide.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: 9, reason: "never mind" },
      });
      // The read ends with the cancel, and its answer is dropped.
      await vi.waitUntil(() => warnings.length > 0, { timeout: 5_000, interval: 10 });
      expect(warnings).toEqual(["dropped the answer to 9: the host cancelled the call"]);
      expect(seen).toEqual([]);
      await proxy.close();
      await silent.close();
    },
  );

  it("keeps the server's order for a small result and the notification after it", async () => {
    const server = rawServer((m) => (m.method === "tools/call" ? undefined : { tools: [] }));
    server.serverSide.onmessage = ((previous) => (message: JSONRPCMessage) => {
      if ("method" in message && message.method === "tools/call" && "id" in message) {
        void server.serverSide.send({
          jsonrpc: "2.0",
          id: message.id,
          result: { content: [{ type: "text", text: "small" }] },
        });
        void server.serverSide.send({
          jsonrpc: "2.0",
          method: "notifications/message",
          params: { level: "info", data: "after the result" },
        });
      } else previous?.(message);
    })(server.serverSide.onmessage);
    const { hostSide, proxy, seen } = await rawHost(sdk, server);
    await hostSide.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "s" } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen.map((m) => ("id" in m ? m.id : "method" in m ? m.method : "?"))).toEqual([
      1,
      "notifications/message",
    ]);
    await proxy.close();
  });
});
