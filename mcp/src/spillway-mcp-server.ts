import { createRequire } from "node:module";
import { Code, ConnectError } from "@connectrpc/connect";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import {
  createReadToolOutputRunner,
  type ReadToolOutputOutcome,
  readToolOutputTool,
  runInfoJson,
  type SpillwayCallOptions,
  type SpillwayClient,
} from "@spillway/client";
import { summarizeAttachment } from "./attachment-json.js";
import { describeConnectError, grpcStatusLine } from "./grpc-error-text.js";
import { createSpillwayResources, spillwayResourceTemplate } from "./spillway-resources.js";

const { version } = createRequire(import.meta.url)("../package.json") as { version: string };

/** SpillwayMcpOptions configure createSpillwayMcpServer. */
export interface SpillwayMcpOptions {
  /** The run a tool call reads when it names none, and whose outputs resources/list shows. */
  readonly runId?: string | undefined;
  /** Deadline of each Spillway call in milliseconds (default 30000). */
  readonly timeoutMs?: number;
}

/** Executors kept per run (each remembers its run's search cursors); the oldest is dropped. */
const keptExecutors = 64;

const runIdProperty = {
  type: "string",
  minLength: 1,
  description:
    "The Spillway run that stored the output. Optional when the server was started with --run.",
} as const;

/** The four tools, their schemas as the MCP host sees them. */
export const spillwayMcpTools: readonly Tool[] = [
  {
    name: readToolOutputTool.name,
    description: `${readToolOutputTool.description} run_id names the run (default: the server's --run).`,
    inputSchema: {
      ...(readToolOutputTool.parameters as Tool["inputSchema"]),
      properties: {
        ...(readToolOutputTool.parameters.properties as Record<string, object>),
        run_id: runIdProperty,
      },
    },
  },
  {
    name: "list_tool_outputs",
    description:
      "List the outputs stored for a run, one page at a time: handle, name, content type, size, line count and resource URI of each. Pass next_page_token back as page_token for the next page.",
    inputSchema: {
      type: "object",
      properties: {
        run_id: runIdProperty,
        page_size: { type: "integer", minimum: 1, maximum: 1000, description: "Outputs per page." },
        page_token: { type: "string", description: "next_page_token of the previous page." },
      },
      additionalProperties: false,
    },
  },
  {
    name: "list_runs",
    description:
      "List the runs of the caller's tenant, one page at a time: run_id, output count, bytes, creation, last update, expiry (null without a TTL) and fork parent of each. Expired and deleted runs are not listed. Pass next_page_token back as page_token for the next page; a page may hold fewer runs than page_size and still have one.",
    inputSchema: {
      type: "object",
      properties: {
        page_size: { type: "integer", minimum: 1, maximum: 1000, description: "Runs per page." },
        page_token: { type: "string", description: "next_page_token of the previous page." },
      },
      additionalProperties: false,
    },
  },
  {
    name: "stat_tool_output",
    description:
      "Describe one stored output without reading it: content type, size in bytes, line count, whether it is binary or truncated, SHA-256, creation and expiry times, and its resource URI.",
    inputSchema: {
      type: "object",
      properties: {
        run_id: runIdProperty,
        handle: { type: "string", minLength: 1, description: "The output's handle." },
      },
      required: ["handle"],
      additionalProperties: false,
    },
  },
];

/** A tool error: the text for the model and the status line naming the gRPC code. */
function toolError(text: string, code: Code): CallToolResult {
  return { content: [{ type: "text", text: `${text}\n${grpcStatusLine(code)}` }], isError: true };
}

function jsonResult(value: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }] };
}

/**
 * SpillwayToolHandler answers a tools/call of one of spillwayMcpTools; aborting `signal` (the
 * host cancelled the request) cancels the service call it makes.
 */
export type SpillwayToolHandler = (
  name: string,
  args: unknown,
  signal?: AbortSignal,
) => Promise<CallToolResult>;

/**
 * createSpillwayToolHandler answers calls of the four tools from the Spillway service behind
 * `client`.
 *
 * Guarantees:
 * - `read_tool_output` takes the SDK tool's arguments (plus `run_id`) and returns exactly the
 *   text createReadToolOutputExecutor returns, which is the server-rendered window.
 * - Every refusal (bad arguments, an unknown handle, a service that is down) is a tool result
 *   with `isError: true` whose last line is `grpc-status: <n> (<NAME>)`; a bad argument found
 *   here reads as INVALID_ARGUMENT, like the service's. Nothing a caller sends throws; only
 *   programming faults do.
 */
export function createSpillwayToolHandler(
  client: SpillwayClient,
  opts: SpillwayMcpOptions = {},
): SpillwayToolHandler {
  const call = { timeoutMs: opts.timeoutMs ?? 30_000 };
  const executors = new Map<
    string,
    (args: unknown, call?: SpillwayCallOptions) => Promise<ReadToolOutputOutcome>
  >();
  const executorFor = (runId: string) => {
    let exec = executors.get(runId);
    if (exec === undefined) {
      exec = createReadToolOutputRunner(client, { runId, call });
      if (executors.size >= keptExecutors) executors.delete(executors.keys().next().value ?? "");
    } else {
      executors.delete(runId);
    }
    executors.set(runId, exec);
    return exec;
  };

  /** The run a call names, or the default; a usage problem as a string. */
  const runOf = (args: Record<string, unknown>): string => {
    const given = args.run_id;
    if (given === undefined && opts.runId !== undefined) return opts.runId;
    if (typeof given !== "string" || given === "") {
      throw new ConnectError(
        "run_id must be a non-empty string (the server has no default run: start it with --run)",
        Code.InvalidArgument,
      );
    }
    return given;
  };

  /** A list tool's page_size and page_token as call options; `also` are its other arguments. */
  const pageArgs = (args: Record<string, unknown>, also: readonly string[]) => {
    const unknown = Object.keys(args).find(
      (k) => ![...also, "page_size", "page_token"].includes(k),
    );
    if (unknown !== undefined) {
      throw new ConnectError(`unknown argument ${JSON.stringify(unknown)}`, Code.InvalidArgument);
    }
    const { page_size: pageSize, page_token: pageToken } = args;
    if (
      pageSize !== undefined &&
      (typeof pageSize !== "number" || !Number.isSafeInteger(pageSize) || pageSize < 1)
    ) {
      throw new ConnectError("page_size must be an integer >= 1", Code.InvalidArgument);
    }
    if (pageToken !== undefined && typeof pageToken !== "string") {
      throw new ConnectError("page_token must be a string", Code.InvalidArgument);
    }
    return {
      ...call,
      ...(pageSize === undefined ? {} : { pageSize }),
      ...(pageToken === undefined ? {} : { pageToken }),
    };
  };

  return async (name: string, input: unknown, signal?: AbortSignal): Promise<CallToolResult> => {
    const callWith = signal === undefined ? call : { ...call, signal };
    const args = (input ?? {}) as Record<string, unknown>;
    if (typeof args !== "object" || Array.isArray(args)) {
      return toolError("error: arguments must be an object", Code.InvalidArgument);
    }
    try {
      if (name === readToolOutputTool.name) {
        const { run_id: _, ...rest } = args;
        const runId = runOf(args);
        const { text, code } = await executorFor(runId)(
          rest,
          signal === undefined ? undefined : { signal },
        );
        if (code !== undefined) return toolError(text, code);
        return { content: [{ type: "text", text }] };
      }
      if (name === "list_tool_outputs") {
        const options = pageArgs(args, ["run_id"]);
        const runId = runOf(args);
        const page = await client.list(runId, { ...options, ...callWith });
        return jsonResult({
          run_id: runId,
          outputs: page.attachments.map((a) => summarizeAttachment(runId, a)),
          next_page_token: page.nextPageToken,
        });
      }
      if (name === "list_runs") {
        const page = await client.listRuns({ ...pageArgs(args, []), ...callWith });
        return jsonResult({
          runs: page.runs.map(runInfoJson),
          next_page_token: page.nextPageToken,
        });
      }
      if (name === "stat_tool_output") {
        const unknown = Object.keys(args).find((k) => !["run_id", "handle"].includes(k));
        if (unknown !== undefined) {
          throw new ConnectError(
            `unknown argument ${JSON.stringify(unknown)}`,
            Code.InvalidArgument,
          );
        }
        const runId = runOf(args);
        if (typeof args.handle !== "string" || args.handle === "") {
          throw new ConnectError("handle must be a non-empty string", Code.InvalidArgument);
        }
        return jsonResult(
          summarizeAttachment(runId, await client.stat(runId, args.handle, callWith)),
        );
      }
      return toolError(`error: unknown tool ${JSON.stringify(name)}`, Code.NotFound);
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      return {
        content: [{ type: "text", text: describeConnectError(err) }],
        isError: true,
      };
    }
  };
}

/**
 * createSpillwayMcpServer returns a factory of MCP servers (the SDK's low-level `Server`),
 * each answering tools/list, tools/call, resources/list, resources/templates/list and
 * resources/read from the Spillway service behind `client`. Stdio uses one; stateless
 * Streamable HTTP one per request. They share the per-run executors.
 *
 * Guarantees: the tools behave as createSpillwayToolHandler says, so nothing a caller sends
 * stops the server; a resource read returns one window bounded by the service's window caps.
 */
export function createSpillwayMcpServer(
  client: SpillwayClient,
  opts: SpillwayMcpOptions = {},
): () => Server {
  const callTool = createSpillwayToolHandler(client, opts);
  const resources = createSpillwayResources(client, opts);

  return () => {
    const server = new Server(
      { name: "spillway-mcp", version },
      {
        capabilities: { tools: {}, resources: {} },
        instructions:
          "Large tool outputs stored in Spillway. Read them window by window with read_tool_output; list_tool_outputs and stat_tool_output describe them without reading.",
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...spillwayMcpTools] }));
    server.setRequestHandler(CallToolRequestSchema, (req, extra) =>
      callTool(req.params.name, req.params.arguments, extra.signal),
    );
    server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
      resourceTemplates: [spillwayResourceTemplate],
    }));
    server.setRequestHandler(ListResourcesRequestSchema, (req, extra) =>
      resources.list(req.params?.cursor, extra.signal),
    );
    server.setRequestHandler(ReadResourceRequestSchema, (req, extra) =>
      resources.read(req.params.uri, extra.signal),
    );
    return server;
  };
}
