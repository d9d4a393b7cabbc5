import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  getDefaultEnvironment,
  StdioClientTransport,
} from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  createReadToolOutputExecutor,
  createSpillwayClient,
  type SpillwayClient,
} from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { runPipeHost } from "./support/mcp-pipe-host.js";
import { packageFile, spillwayMcpProxy } from "./support/package-bins.js";
import { scratchDir } from "./support/scratch-dir.js";
import { startSilentServer } from "./support/silent-server.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** The reference filesystem MCP server from npm, a server nobody here wrote. */
const filesystemServer = packageFile("@modelcontextprotocol/server-filesystem", "dist/index.js");

const token = "proxy-test-token";
const tenant = "proxy-tenant";
const runId = "run-proxy";
const band = 20_000;
const maxWindowLines = 500;
const lineCount = 12_000;
const big = `${Array.from({ length: lineCount }, (_, i) => `row ${i + 1}: ${"abcdefghij".repeat(5)}`).join("\n")}\n`;
const small = "a small file\nwith two lines\n";
/** Over the MCP SDK's default 10 MiB stdio message limit (the server's reply is about 24 MB). */
const huge = `${Array.from({ length: 200_000 }, (_, i) => `huge ${i + 1}: ${"0123456789".repeat(5)}`).join("\n")}\n`;
/** A 1x1 PNG: image content must cross the proxy as the server sent it. */
const png = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

function blocks(result: unknown): CallToolResult["content"] {
  return (result as CallToolResult).content;
}

/**
 * `spillway-mcp-proxy` in front of the reference filesystem MCP server
 * (@modelcontextprotocol/server-filesystem from npm), driven by the MCP SDK's own Client, with
 * a real `spillway serve` that wants a token. The same calls go to the filesystem server
 * directly for the ground truth.
 */
describe("spillway-mcp-proxy in front of the reference filesystem server", () => {
  const dir = scratchDir("spillway-mcp-proxy-");
  const files = join(dir, "files");
  let spillway: SpillwayProcess;
  let sdk: SpillwayClient;
  let sdkTool: (args: unknown) => Promise<string>;
  let direct: Client;
  let proxied: Client;
  /** The proxy's command line in front of the filesystem server, `extra` flags before `--`. */
  const proxyArgs = (extra: readonly string[]) => [
    spillwayMcpProxy,
    "--url",
    spillway.url,
    ...extra,
    "--run",
    runId,
    "--band",
    String(band),
    "--",
    process.execPath,
    filesystemServer,
    files,
  ];

  beforeAll(async () => {
    mkdirSync(files);
    writeFileSync(join(files, "big.txt"), big);
    writeFileSync(join(files, "small.txt"), small);
    writeFileSync(join(files, "huge.txt"), huge);
    writeFileSync(join(files, "pixel.png"), png);
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
    direct = new Client({ name: "direct-host", version: "1.0.0" });
    await direct.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [filesystemServer, files],
        stderr: "ignore",
      }),
    );
    proxied = new Client({ name: "proxied-host", version: "1.0.0" });
    await proxied.connect(
      new StdioClientTransport({
        command: process.execPath,
        // No --tenant: the proxy asks the service which tenant the token names.
        args: proxyArgs([]),
        env: { ...getDefaultEnvironment(), SPILLWAY_TOKEN: token },
        stderr: "ignore",
      }),
    );
  });
  afterAll(async () => {
    await proxied?.close();
    await direct?.close();
    await spillway?.stop();
  });

  it("lists the server's tools, without output schemas, plus read_tool_output", async () => {
    const { tools: theirs } = await direct.listTools();
    const { tools: ours } = await proxied.listTools();
    expect(theirs.length).toBeGreaterThan(5);
    expect(ours.slice(0, -1)).toEqual(theirs.map(({ outputSchema: _, ...t }) => t));
    expect(ours.at(-1)?.name).toBe("read_tool_output");
  });

  it("passes small results and images through exactly as the server sent them", async () => {
    for (const [name, args] of [
      ["read_text_file", { path: join(files, "small.txt") }],
      ["list_allowed_directories", {}],
      ["read_media_file", { path: join(files, "pixel.png") }],
      ["read_text_file", { path: join(files, "missing.txt") }],
    ] as const) {
      const theirs = await direct.callTool({ name, arguments: args });
      expect(await proxied.callTool({ name, arguments: args }), name).toEqual(theirs);
    }
    const image = blocks(
      await proxied.callTool({
        name: "read_media_file",
        arguments: { path: join(files, "pixel.png") },
      }),
    )[0];
    expect(image).toMatchObject({
      type: "image",
      mimeType: "image/png",
      data: png.toString("base64"),
    });
  });

  it("stores a result over the band in Spillway and reads it back window by window, byte for byte", async () => {
    const args = { path: join(files, "big.txt") };
    const theirs = await direct.callTool({ name: "read_text_file", arguments: args });
    const fullText = (blocks(theirs)[0] as { text: string }).text;
    expect(fullText).toBe(big);

    const ours = await proxied.callTool({ name: "read_text_file", arguments: args });
    const content = blocks(ours);
    // The text's preview and link, then the structured content's (the server mirrors the text).
    expect(content.map((b) => b.type)).toEqual(["text", "resource_link", "text", "resource_link"]);
    expect(ours.structuredContent).toBeUndefined();
    const preview = (content[0] as { text: string }).text;
    const link = content[1] as { uri: string; name: string; mimeType: string };
    const handle = link.name;
    expect(handle).toMatch(/^res_mcp-[0-9a-f]{8}-\d+$/);
    expect(preview).toContain(handle);
    expect(preview.length).toBeLessThan(band);
    expect(link).toMatchObject({ uri: `spillway://${runId}/${handle}`, mimeType: "text/plain" });

    // What Spillway holds is the whole result.
    const stat = await sdk.stat(runId, handle);
    expect(stat.sha256).toBe(createHash("sha256").update(fullText).digest("hex"));

    // Window by window through the proxy's read_tool_output; each the SDK tool's text, and the
    // lines rebuilt from them are the file.
    const rebuilt: string[] = [];
    for (let offset = 0; offset < lineCount; offset += maxWindowLines) {
      const windowArgs = { handle, offset };
      const text = (
        blocks(await proxied.callTool({ name: "read_tool_output", arguments: windowArgs }))[0] as {
          text: string;
        }
      ).text;
      expect(text).toBe(await sdkTool(windowArgs));
      for (const [, line = ""] of text.matchAll(/^ *\d+\t(.*)$/gm)) rebuilt.push(line);
    }
    expect(`${rebuilt.join("\n")}\n`).toBe(big);

    // The structured content, stored as JSON under its own handle, holds the same text.
    const structured = content[3] as { name: string; mimeType: string };
    expect(structured.mimeType).toBe("application/json");
    const structuredStat = await sdk.stat(runId, structured.name);
    expect(structuredStat.sha256).toBe(
      createHash("sha256")
        .update(JSON.stringify({ content: big }))
        .digest("hex"),
    );
  });

  it("answers resources/read of the links it hands out, on the same connection", async () => {
    // The filesystem server has no resources: without the proxy a read is "method not found".
    expect(direct.getServerCapabilities()?.resources).toBeUndefined();
    expect(proxied.getServerCapabilities()?.resources).toBeDefined();
    const ours = await proxied.callTool({
      name: "read_text_file",
      arguments: { path: join(files, "big.txt") },
    });
    const link = blocks(ours)[1] as { uri: string; name: string };
    const { contents } = await proxied.readResource({ uri: link.uri });
    expect(contents).toEqual([
      { uri: link.uri, mimeType: "text/plain", text: await sdkTool({ handle: link.name }) },
    ]);
    expect((contents[0] as { text: string }).text).toContain(`1\trow 1: abcdefghij`);

    const { resourceTemplates } = await proxied.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(["spillway://{run}/{handle}"]);
    const { resources } = await proxied.listResources();
    expect(resources.map((r) => r.uri)).toContain(link.uri);

    // A link to an output the run does not have: "resource not found", its message said once.
    const missing = proxied.readResource({ uri: `spillway://${runId}/res_none` });
    await expect(missing).rejects.toMatchObject({ code: -32002 });
    const { message } = (await missing.catch((err: unknown) => err)) as Error;
    expect(message).toMatch(/^MCP error -32002: invalid_deferred_handle: /);
    expect(message).toMatch(/\(grpc-status: 7 PERMISSION_DENIED\)$/);
  });

  it("answers read_tool_output errors itself and keeps relaying", async () => {
    const bad = await proxied.callTool({
      name: "read_tool_output",
      arguments: { handle: "res_none" },
    });
    expect(bad.isError).toBe(true);
    expect((blocks(bad)[0] as { text: string }).text).toMatch(
      /grpc-status: 7 \(PERMISSION_DENIED\)$/,
    );
    const theirs = await direct.callTool({ name: "list_allowed_directories", arguments: {} });
    expect(await proxied.callTool({ name: "list_allowed_directories", arguments: {} })).toEqual(
      theirs,
    );
  });

  it("stores a result larger than the SDK's 10 MiB stdio message limit", async () => {
    const result = await proxied.callTool(
      { name: "read_text_file", arguments: { path: join(files, "huge.txt") } },
      undefined,
      { timeout: 120_000 },
    );
    const link = blocks(result)[1] as { name: string };
    expect(huge.length).toBeGreaterThan(10 * 1024 * 1024);
    expect((await sdk.stat(runId, link.name)).sha256).toBe(
      createHash("sha256").update(huge).digest("hex"),
    );
  });

  it("forgets a call the host cancels while a Spillway that hangs is storing its result", async () => {
    const silent = await startSilentServer();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        spillwayMcpProxy,
        "--url",
        silent.url,
        "--tenant",
        tenant,
        "--timeout-ms",
        "60000",
        "--",
        process.execPath,
        filesystemServer,
        files,
      ],
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const host = new Client({ name: "cancelling-host", version: "1.0.0" });
    const stray: string[] = [];
    host.onerror = (err) => stray.push(err.message);
    await host.connect(transport);
    const ac = new AbortController();
    const call = host.callTool(
      { name: "read_text_file", arguments: { path: join(files, "big.txt") } },
      undefined,
      { signal: ac.signal },
    );
    // The offload has started once its first bytes reach the listener; it will never answer.
    await silent.reached;
    ac.abort("the user gave up");
    await expect(call).rejects.toThrow(/the user gave up/);
    await vi.waitUntil(() => stderr.includes("dropped"), { timeout: 5_000, interval: 20 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stderr).toMatch(
      /^spillway-mcp-proxy: dropped the server's answer to \d+: the host cancelled the call while its result was being stored$/m,
    );
    expect(stderr).not.toMatch(/passed through whole/);
    expect(stray).toEqual([]);
    await host.close();
    await silent.close();
  });

  it("answers a large result to a host that wrote its requests and closed stdin", async () => {
    const { answers } = await runPipeHost(
      proxyArgs(["--tenant", tenant]),
      { ...getDefaultEnvironment(), SPILLWAY_TOKEN: token },
      { name: "read_text_file", arguments: { path: join(files, "big.txt") } },
    );
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    const link = answers[1]?.result.content[1] as { type: string; name: string };
    expect(link.type).toBe("resource_link");
    expect((await sdk.stat(runId, link.name)).sha256).toBe(
      createHash("sha256").update(big).digest("hex"),
    );
  });
});
