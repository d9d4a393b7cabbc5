import { Code, ConnectError } from "@connectrpc/connect";
import {
  ErrorCode,
  type ListResourcesResult,
  type ReadResourceResult,
  type ResourceTemplate,
} from "@modelcontextprotocol/sdk/types.js";
import type { SpillwayClient } from "@spillway/client";
import { statusName } from "@spillway/wire";
import { parseResourceUri, resourceUri } from "./attachment-json.js";

/** spillwayResourceTemplate is the one URI template: every stored output of every run. */
export const spillwayResourceTemplate: ResourceTemplate = {
  uriTemplate: "spillway://{run}/{handle}",
  name: "spillway-output",
  title: "Stored tool output",
  description:
    "A tool output stored in Spillway, by run id and handle. A read returns one bounded window: the first lines as the server renders them for read_tool_output (numbered like cat -n, capped by the service's max_window_lines and max_window_chars), never the whole payload; use the read_tool_output tool for further windows, searches and bytes.",
  mimeType: "text/plain",
};

/**
 * The MCP specification's code for a resource that does not exist; the SDK's ErrorCode has no
 * name for it.
 */
const resourceNotFound = -32002;

/**
 * JsonRpcError is a refusal as the host sees it in a JSON-RPC error: `code`, `message` and
 * `data`. The MCP SDK's server sends a thrown error's own code, message and data, so this is
 * thrown rather than the SDK's McpError, whose message starts "MCP error <code>: " and reaches
 * the host's McpError, which prefixes it again.
 */
export interface JsonRpcError extends Error {
  readonly code: number;
  readonly data?: unknown;
}

/** jsonRpcError makes a JsonRpcError; `message` is what the host's error says after its code. */
export function jsonRpcError(code: number, message: string, data?: unknown): JsonRpcError {
  return Object.assign(new Error(message), { code, ...(data === undefined ? {} : { data }) });
}

/**
 * resourceError is a refusal of a resources/* request: an output the run does not have
 * (NOT_FOUND, or PERMISSION_DENIED for a handle not recorded in the run) is "resource not
 * found", a bad argument is "invalid params", anything else internal. The message ends with
 * the gRPC code, which `data.grpc_status` also carries.
 */
function resourceError(err: ConnectError): JsonRpcError {
  const code =
    err.code === Code.NotFound || err.code === Code.PermissionDenied
      ? resourceNotFound
      : err.code === Code.InvalidArgument
        ? ErrorCode.InvalidParams
        : ErrorCode.InternalError;
  return jsonRpcError(
    code,
    `${err.rawMessage} (grpc-status: ${err.code} ${statusName(err.code)})`,
    {
      grpc_status: err.code,
      grpc_code: statusName(err.code),
    },
  );
}

/** SpillwayResources answer the MCP resources/* requests from a Spillway service. */
export interface SpillwayResources {
  /**
   * One page of `runId`'s outputs as resources (none without a run), each with its MIME type,
   * size and `spillway://` URI; `nextCursor` while more remain.
   */
  list(cursor: string | undefined, signal?: AbortSignal): Promise<ListResourcesResult>;
  /**
   * Reads a `spillway://<run>/<handle>` URI as one window: the first lines as read_tool_output
   * renders them, bounded by the service's window caps, never the whole payload. Rejects with
   * a JsonRpcError: "invalid params" for a URI that is not Spillway's, "resource not found"
   * for an output the run does not have. Aborting `signal` cancels the read.
   */
  read(uri: string, signal?: AbortSignal): Promise<ReadResourceResult>;
}

/**
 * createSpillwayResources answers resources/list (the outputs of `opts.runId`) and
 * resources/read (any run's output by URI) through `client`, each call within
 * `opts.timeoutMs` (default 30000). spillway-mcp serves them; spillway-mcp-proxy answers the
 * `spillway://` links it hands out with them.
 */
export function createSpillwayResources(
  client: SpillwayClient,
  opts: { readonly runId?: string | undefined; readonly timeoutMs?: number } = {},
): SpillwayResources {
  const call = { timeoutMs: opts.timeoutMs ?? 30_000 };
  return {
    async list(cursor, signal) {
      const runId = opts.runId;
      if (runId === undefined) return { resources: [] };
      let page: Awaited<ReturnType<SpillwayClient["list"]>>;
      try {
        page = await client.list(runId, {
          ...call,
          ...(signal === undefined ? {} : { signal }),
          pageToken: cursor ?? "",
        });
      } catch (err) {
        if (!(err instanceof ConnectError)) throw err;
        throw resourceError(err);
      }
      return {
        resources: page.attachments.map((a) => ({
          uri: resourceUri(runId, a.handle),
          name: a.handle,
          title: a.name === "" ? a.handle : `${a.name} (${a.handle})`,
          description: `${a.lineCount} lines, ${a.sizeBytes} bytes${a.binary ? ", binary" : ""}. A read returns the first window only, bounded by the service's window caps; read_tool_output reads the rest.`,
          mimeType: a.contentType === "" ? "application/octet-stream" : a.contentType,
          size: Number(a.sizeBytes),
        })),
        ...(page.nextPageToken === "" ? {} : { nextCursor: page.nextPageToken }),
      };
    },
    async read(uri, signal) {
      const parsed = parseResourceUri(uri);
      if (parsed === undefined) {
        throw jsonRpcError(
          ErrorCode.InvalidParams,
          `not a Spillway resource URI (spillway://<run>/<handle>): ${uri}`,
        );
      }
      try {
        const window = await client.readToolOutput(
          {
            runId: parsed.runId,
            handle: parsed.handle,
            window: { case: "lines", value: { offset: 0n } },
          },
          signal === undefined ? call : { ...call, signal },
        );
        return { contents: [{ uri, mimeType: "text/plain", text: window.rendered }] };
      } catch (err) {
        if (!(err instanceof ConnectError)) throw err;
        throw resourceError(err);
      }
    },
  };
}
