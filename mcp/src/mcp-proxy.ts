import { randomBytes } from "node:crypto";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type CallToolResult,
  ErrorCode,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import {
  countChars,
  createElisionPolicy,
  readToolOutputToolName,
  type SpillwayClient,
} from "@spillway/client";
import { parseResourceUri, resourceUri } from "./attachment-json.js";
import { createSpillwayToolHandler, spillwayMcpTools } from "./spillway-mcp-server.js";
import { createSpillwayResources, spillwayResourceTemplate } from "./spillway-resources.js";

/** McpProxyOptions configure startMcpProxy. */
export interface McpProxyOptions {
  /** The Spillway client results are offloaded through and read back with. */
  readonly client: SpillwayClient;
  /** The tenant of the offload keys (the token's tenant; `dev` for a dev-mode server). */
  readonly tenant: string;
  /** The run every offloaded result is stored in. */
  readonly runId: string;
  /** Results whose text is longer than this many characters are offloaded. */
  readonly bandChars: number;
  /** The transport facing the MCP host (stdio for the CLI). */
  readonly host: Transport;
  /** The transport to the wrapped MCP server (a spawned child for the CLI). */
  readonly child: Transport;
  /** Deadline of each Spillway call in milliseconds (default 30000). */
  readonly timeoutMs?: number;
  /** Where a problem that is not the host's to see is reported (default: nowhere). */
  readonly warn?: (message: string) => void;
}

/** McpProxy is a running proxy. */
export interface McpProxy {
  /**
   * Settles when either side has closed (the other is then closed too) and every result the
   * server sent has been handed to the host.
   */
  readonly closed: Promise<void>;
  /** Closes both transports. */
  close(): Promise<void>;
}

type Id = string | number;

/**
 * startMcpProxy relays JSON-RPC messages between an MCP host and a wrapped MCP server, as they
 * are, in both directions (requests, notifications, responses, the server's own requests such
 * as sampling), except for three things:
 * - the server's `initialize` result declares the `tools` capability; every page of its
 *   `tools/list` loses the server's own `read_tool_output` and the output schemas, and the last
 *   page gains the proxy's `read_tool_output`;
 * - a `tools/call` of `read_tool_output` is answered by the proxy from Spillway (the wrapped
 *   server never sees it), with the text the SDK tool returns;
 * - the `spillway://` links it hands out are readable on the same connection: the
 *   `initialize` result declares the `resources` capability, a `resources/read` of a
 *   `spillway://<run>/<handle>` URI is answered by the proxy (one bounded window, as
 *   spillway-mcp answers it), and `resources/templates/list` gains the `spillway://` template.
 *   When the server has no resources of its own, the proxy answers `resources/list` (the run's
 *   outputs) and `resources/templates/list` itself; otherwise both go to the server;
 * - a `tools/call` result whose text blocks hold more than `bandChars` characters together is
 *   offloaded to Spillway whole (the text blocks joined by newlines, as `text/plain`); the host
 *   gets the server-rendered preview naming the handle and a `resource_link` to
 *   `spillway://<run>/<handle>` in their place. `structuredContent` longer than the band as
 *   JSON is offloaded the same way (`application/json`, its own handle) and left out, so the
 *   listed tools lose their `outputSchema`. An embedded text resource whose text is over the
 *   band is offloaded alone too (its MIME type, its own handle) and its stand-in takes its
 *   place. Every other block (images, audio, binary resources, links, small embedded text),
 *   `isError` and `_meta` pass untouched, and so does a result at or under the band, byte for
 *   byte as the server sent it.
 *
 * If the offload fails, whether Spillway refuses it or cannot be reached, the result passes
 * through whole (and `warn` says why), so nothing is lost. A result the server sent just
 * before exiting still reaches the host before the proxy closes, and a call it never answered
 * gets a JSON-RPC error (-32000) saying the server exited. A call the host cancels is
 * forgotten, whenever the cancel comes: no answer to it is sent. The server's late answer is
 * dropped, not spilled; a result being stored has its offload aborted and is dropped; an answer
 * the proxy is preparing itself (read_tool_output, a resource read) is dropped when ready. Each
 * drop is reported through `warn`; the cancel goes on to the server only while it has the call.
 */
export async function startMcpProxy(opts: McpProxyOptions): Promise<McpProxy> {
  const { host, child } = opts;
  const call = { timeoutMs: opts.timeoutMs ?? 30_000 };
  const policy = createElisionPolicy({
    bands: [{ upTo: opts.bandChars, action: "passthrough" }, { action: "spill" }],
    // A spill that cannot be stored fails instead of falling back to a local head and tail, so
    // the result passes through whole: nothing the server sent is lost.
    preservation: "required",
  });
  const readTool = createSpillwayToolHandler(opts.client, { runId: opts.runId, ...call });
  const resources = createSpillwayResources(opts.client, { runId: opts.runId, ...call });
  /** Whether the server declared resources of its own in its `initialize` result. */
  let serverResources = false;
  const session = randomBytes(4).toString("hex");
  let calls = 0;
  /** Results being spilled: the host gets them even if the server exits meanwhile. */
  const delivering = new Set<Promise<unknown>>();
  /** The host's requests in flight to the server: what each asked, for its response. */
  const asked = new Map<Id, { method: string; tool?: string }>();
  /**
   * The host's requests the server has answered or the proxy answers itself, until their
   * answer is sent: a cancel aborts what is still being done for one (its offload) and drops
   * its answer.
   */
  const pending = new Map<Id, AbortController>();

  const toHost = (message: JSONRPCMessage) =>
    host.send(message).catch((err: unknown) => opts.warn?.(`sending to the host: ${err}`));
  const toChild = (message: JSONRPCMessage) =>
    child.send(message).catch((err: unknown) => opts.warn?.(`sending to the server: ${err}`));

  /** Offloads one part of a result if it is over the band; the stand-in blocks, or undefined. */
  const elide = async (
    signal: AbortSignal,
    tool: string,
    callId: string,
    content: string | { json: unknown },
    what = typeof content === "string" ? "result" : "structured result",
    mimeType = typeof content === "string" ? "text/plain" : "application/json",
  ): Promise<CallToolResult["content"] | undefined> => {
    if (signal.aborted) return undefined;
    let elided: Awaited<ReturnType<typeof policy.apply>>;
    try {
      elided = await policy.apply({
        client: opts.client,
        key: { tenant: opts.tenant, runId: opts.runId, callId },
        content,
        toolName: tool,
        offload: { contentType: mimeType, name: tool },
        call: { ...call, signal },
      });
    } catch (err) {
      // A cancelled call's result is dropped, not passed through: nothing to say about it here.
      if (!signal.aborted) {
        opts.warn?.(`offloading the result of ${tool} failed, passed through whole: ${err}`);
      }
      return undefined;
    }
    if (elided.kind !== "spilled") return undefined;
    const stand: CallToolResult["content"] = [{ type: "text", text: elided.text }];
    const handle = elided.attachment?.handle;
    if (handle !== undefined) {
      stand.push({
        type: "resource_link",
        uri: resourceUri(opts.runId, handle),
        name: handle,
        title: `${tool} ${what}`,
        mimeType,
        description: `The full ${what} of a ${tool} call, stored in Spillway; read it with read_tool_output (handle ${handle}). A resource read returns one bounded window.`,
      });
    }
    return stand;
  };

  /** Whether any part of a result is over the band, measured as the elision policy does. */
  const overBand = (result: CallToolResult): boolean => {
    const content = Array.isArray(result.content) ? result.content : [];
    const texts = content.flatMap((b) => (b.type === "text" ? [b.text] : []));
    if (countChars(texts.join("\n")) > opts.bandChars) return true;
    if (
      content.some(
        (b) =>
          b.type === "resource" &&
          "text" in b.resource &&
          typeof b.resource.text === "string" &&
          countChars(b.resource.text) > opts.bandChars,
      )
    ) {
      return true;
    }
    return (
      result.structuredContent !== undefined &&
      countChars(JSON.stringify(result.structuredContent)) > opts.bandChars
    );
  };

  const spill = async (
    signal: AbortSignal,
    tool: string,
    result: CallToolResult,
  ): Promise<CallToolResult> => {
    const content = Array.isArray(result.content) ? result.content : [];
    const texts = content.filter((b) => b.type === "text");
    calls += 1;
    const callId = `mcp-${session}-${calls}`;
    let out: CallToolResult = result;
    if (texts.length > 0) {
      const stand = await elide(signal, tool, callId, texts.map((b) => b.text).join("\n"));
      if (stand !== undefined) {
        // Text blocks collapse into the preview where the first one was; the rest keep order.
        const first = content.indexOf(texts[0] as (typeof content)[number]);
        const others = content.filter((b) => b.type !== "text");
        out = { ...out, content: [...others.slice(0, first), ...stand, ...others.slice(first)] };
      }
    }
    // An embedded text resource over the band is stored on its own, in its place.
    if (Array.isArray(out.content)) {
      const blocks: CallToolResult["content"] = [];
      for (const [i, block] of out.content.entries()) {
        const embedded = block.type === "resource" ? block.resource : undefined;
        const stand =
          embedded !== undefined && "text" in embedded && typeof embedded.text === "string"
            ? await elide(
                signal,
                tool,
                `${callId}-resource-${i}`,
                embedded.text,
                `embedded resource ${embedded.uri}`,
                embedded.mimeType ?? "text/plain",
              )
            : undefined;
        blocks.push(...(stand ?? [block]));
      }
      out = { ...out, content: blocks };
    }
    if (result.structuredContent !== undefined) {
      const stand = await elide(signal, tool, `${callId}-structured`, {
        json: result.structuredContent,
      });
      if (stand !== undefined) {
        const { structuredContent: _, ...rest } = out;
        const kept = Array.isArray(rest.content) ? rest.content : [];
        out = { ...rest, content: [...kept, ...stand] };
      }
    }
    return out;
  };

  /**
   * Answers a host's request with what `work` resolves to, or its JsonRpcError, unless the host
   * cancels the request first; the cancel aborts the signal `work` is given.
   */
  const answer = (id: Id, work: (signal: AbortSignal) => Promise<Record<string, unknown>>) => {
    const cancel = new AbortController();
    pending.set(id, cancel);
    const send = (message: JSONRPCMessage) => {
      if (pending.get(id) === cancel) pending.delete(id);
      if (cancel.signal.aborted) {
        opts.warn?.(`dropped the answer to ${JSON.stringify(id)}: the host cancelled the call`);
        return;
      }
      void toHost(message);
    };
    void work(cancel.signal).then(
      (result) => send({ jsonrpc: "2.0", id, result }),
      (err: { code?: unknown; message?: unknown; data?: unknown }) =>
        send({
          jsonrpc: "2.0",
          id,
          error: {
            code: typeof err.code === "number" ? err.code : ErrorCode.InternalError,
            message: String(err.message),
            ...(err.data === undefined ? {} : { data: err.data }),
          },
        }),
    );
  };

  host.onmessage = (message: JSONRPCMessage) => {
    if (isJSONRPCRequest(message)) {
      const params = (message.params ?? {}) as {
        name?: unknown;
        arguments?: unknown;
        uri?: unknown;
        cursor?: unknown;
      };
      if (message.method === "tools/call" && params.name === readToolOutputToolName) {
        const args = params.arguments ?? {};
        answer(message.id, (signal) => readTool(readToolOutputToolName, args, signal));
        return;
      }
      if (
        message.method === "resources/read" &&
        typeof params.uri === "string" &&
        parseResourceUri(params.uri) !== undefined
      ) {
        const uri = params.uri;
        answer(message.id, (signal) => resources.read(uri, signal));
        return;
      }
      if (!serverResources && message.method === "resources/list") {
        const cursor = typeof params.cursor === "string" ? params.cursor : undefined;
        answer(message.id, (signal) => resources.list(cursor, signal));
        return;
      }
      if (!serverResources && message.method === "resources/templates/list") {
        answer(message.id, () =>
          Promise.resolve({ resourceTemplates: [spillwayResourceTemplate] }),
        );
        return;
      }
      asked.set(message.id, {
        method: message.method,
        ...(typeof params.name === "string" ? { tool: params.name } : {}),
      });
    } else if ("method" in message && message.method === "notifications/cancelled") {
      const cancelled = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof cancelled === "string" || typeof cancelled === "number") {
        asked.delete(cancelled);
        const work = pending.get(cancelled);
        if (work !== undefined) {
          // The server is done with this call (or never saw it): the cancel is the proxy's.
          work.abort();
          return;
        }
      }
    }
    void toChild(message);
  };

  child.onmessage = (message: JSONRPCMessage) => {
    if (!isJSONRPCResultResponse(message) && !("error" in message && "id" in message)) {
      void toHost(message);
      return;
    }
    const id = (message as { id: Id }).id;
    const request = asked.get(id);
    asked.delete(id);
    if (request === undefined) {
      // Every request the server sees is the host's and recorded, until the host cancels it:
      // this is a late answer to a cancelled call, which the host no longer waits for.
      opts.warn?.(`dropped the server's answer to ${JSON.stringify(id)}, cancelled or unknown`);
      return;
    }
    if (!isJSONRPCResultResponse(message)) {
      void toHost(message);
      return;
    }
    try {
      relayResult(message, request);
    } catch (err) {
      // A result of a shape no server should send (a null block, nesting too deep to measure):
      // relayed as it came, or, if even that fails, answered with an error, never dropped.
      opts.warn?.(`relaying the server's answer to ${JSON.stringify(id)} as it came: ${err}`);
      void relayOrRefuse(message);
    }
  };

  /** Sends `message` to the host, or, when it cannot be sent, an error answering its id. */
  const relayOrRefuse = (message: JSONRPCMessage & { id: Id }) =>
    host.send(message).catch((err: unknown) =>
      toHost({
        jsonrpc: "2.0",
        id: message.id,
        error: {
          code: ErrorCode.InternalError,
          message: `the wrapped MCP server's answer could not be relayed: ${err}`,
        },
      }),
    );

  /** Relays one answer of the server to a request of the host, changed as startMcpProxy says. */
  const relayResult = (
    message: JSONRPCMessage & { id: Id; result: Record<string, unknown> },
    request: { method: string; tool?: string },
  ): void => {
    const result = message.result;
    if (request.method === "initialize") {
      const capabilities = (result.capabilities ?? {}) as Record<string, unknown>;
      serverResources = capabilities.resources !== undefined;
      result.capabilities = {
        ...capabilities,
        tools: capabilities.tools ?? {},
        resources: capabilities.resources ?? {},
      };
    } else if (request.method === "resources/templates/list" && result.nextCursor === undefined) {
      const templates = Array.isArray(result.resourceTemplates) ? result.resourceTemplates : [];
      result.resourceTemplates = [...templates, spillwayResourceTemplate];
    } else if (request.method === "tools/list") {
      // A spilled result's structured content is in Spillway, not inline, so a host must not
      // hold the result to an output schema. Every page loses the server's own
      // read_tool_output (the proxy answers that name); the last one gains the proxy's.
      const tools = (Array.isArray(result.tools) ? (result.tools as Tool[]) : [])
        .filter((t) => t.name !== readToolOutputToolName)
        .map(({ outputSchema: _, ...t }) => t);
      result.tools = result.nextCursor === undefined ? [...tools, spillwayMcpTools[0]] : tools;
    } else if (request.method === "tools/call" && request.tool !== undefined) {
      const tool = request.tool;
      if (!overBand(result as CallToolResult)) {
        // Nothing to store: relayed at once, so it keeps its place among the server's messages.
        void relayOrRefuse(message);
        return;
      }
      const cancel = new AbortController();
      pending.set(message.id, cancel);
      const delivery = spill(cancel.signal, tool, result as CallToolResult)
        .catch((err: unknown) => {
          if (!cancel.signal.aborted) {
            opts.warn?.(`spilling the result of ${tool} failed, passed through whole: ${err}`);
          }
          return result as CallToolResult;
        })
        .then((r) => {
          if (pending.get(message.id) === cancel) pending.delete(message.id);
          if (cancel.signal.aborted) {
            opts.warn?.(
              `dropped the server's answer to ${JSON.stringify(message.id)}: the host cancelled the call while its result was being stored`,
            );
            return;
          }
          return relayOrRefuse({ ...message, result: r as Record<string, unknown> });
        })
        .finally(() => delivering.delete(delivery));
      delivering.add(delivery);
      return;
    }
    void relayOrRefuse(message);
  };

  let closing = false;
  let done: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    done = resolve;
  });
  const close = async () => {
    if (closing) return;
    closing = true;
    // Closing the child lets it answer what it already read; those answers, and any result
    // still being spilled, reach the host (whose stdout outlives its stdin) before the end.
    await Promise.allSettled([host.close(), child.close()]);
    while (delivering.size > 0) await Promise.allSettled([...delivering]);
    done();
  };
  host.onclose = () => void close();
  // A server may answer and exit at once; what it answered reaches the host before it closes,
  // and a call it never answered gets an error rather than silence.
  child.onclose = () =>
    void Promise.allSettled([...delivering])
      .then(() =>
        Promise.allSettled(
          [...asked.keys()].map((id) =>
            toHost({
              jsonrpc: "2.0",
              id,
              error: {
                code: ErrorCode.ConnectionClosed,
                message: "the wrapped MCP server exited before answering",
              },
            }),
          ),
        ),
      )
      .then(close);
  host.onerror = (err) => opts.warn?.(`host transport: ${err.message}`);
  child.onerror = (err) => opts.warn?.(`server transport: ${err.message}`);
  await child.start();
  await host.start();
  return { closed, close };
}
