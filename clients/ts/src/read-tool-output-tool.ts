import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type {
  ReadToolOutputRequestSchema,
  SearchCursor,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { ErrorInfoSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import { statusName } from "@spillway/wire";
import type { SpillwayCallOptions, SpillwayClient, Window } from "./client.js";

/** readToolOutputToolName is the model tool's name; its results must never be offloaded again. */
export const readToolOutputToolName = "read_tool_output";

/** ToolDefinition is a model tool as function-calling APIs declare it: name, description, JSON Schema. */
export interface ToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

/**
 * readToolOutputTool is the ready `read_tool_output` definition. Its parameters are a JSON
 * Schema object with `handle` required and no other properties allowed; `mode: "bytes"` is an
 * alias of `bytes: true`, because the server's previews and hints spell bytes reads that way,
 * and `mode: "json"` of `json: true`.
 */
export const readToolOutputTool: ToolDefinition = {
  name: readToolOutputToolName,
  description: [
    "Read a window of a large tool output that was stored instead of shown in full.",
    "Pass the handle from its preview (for example res_call-1).",
    "Lines: offset is the 0-based line to start at and limit the number of lines; with",
    "from_end=true both count back from the last line (a tail). Lines are numbered from 1 like",
    "`cat -n`, and every window ends with how to ask for the next one.",
    "Search: set pattern (a literal string, or an RE2 regular expression with regex=true;",
    "ignore_case, context lines around each match, skip matches already seen, limit matches).",
    "Bytes: bytes=true reads raw bytes (offset and limit are then bytes), for binary outputs",
    "and very long lines.",
    "JSON: json=true pages a JSON output pretty-printed, one member or element per line (JSON",
    "Lines: one record per line); offset, limit and from_end then count lines of that view.",
    "JSONPath: jsonpath runs an RFC 9535 JSONPath query (for example $.items[?@.status=='failed'].id)",
    "and returns the matched nodes' paths and values; skip and limit page them.",
    "The service caps every window, whatever limit you ask for.",
    "Terminal colour codes are removed from the text unless keep_ansi=true.",
  ].join(" "),
  parameters: {
    type: "object",
    properties: {
      handle: { type: "string", description: "The output's handle, as shown in its preview." },
      offset: {
        type: "integer",
        minimum: 0,
        description: "0-based line (or byte, with bytes=true) to start at. Default 0.",
      },
      limit: {
        type: "integer",
        minimum: 1,
        description: "Lines, bytes or matches to return; the service caps it.",
      },
      from_end: { type: "boolean", description: "Count offset and limit back from the last line." },
      pattern: { type: "string", minLength: 1, description: "Search for this text." },
      regex: { type: "boolean", description: "Treat pattern as an RE2 regular expression." },
      ignore_case: { type: "boolean", description: "Match the pattern case-insensitively." },
      context: {
        type: "integer",
        minimum: 0,
        maximum: 20,
        description: "Lines of context before and after each match.",
      },
      skip: { type: "integer", minimum: 0, description: "Matches to skip (to page a search)." },
      jsonpath: {
        type: "string",
        minLength: 1,
        description: "An RFC 9535 JSONPath query over a JSON or JSON Lines output.",
      },
      bytes: { type: "boolean", description: "Read raw bytes; offset and limit are then bytes." },
      json: {
        type: "boolean",
        description: "Read the JSON view; offset and limit are then lines of that view.",
      },
      mode: {
        type: "string",
        enum: ["lines", "bytes", "json"],
        description: 'Same as bytes=true when "bytes", json=true when "json".',
      },
      keep_ansi: {
        type: "boolean",
        description:
          "Keep terminal escape sequences (colour codes) in the text; by default they are removed.",
      },
    },
    required: ["handle"],
    additionalProperties: false,
  },
};

/** ReadToolOutputExecutorOptions configure createReadToolOutputExecutor. */
export interface ReadToolOutputExecutorOptions {
  /** The reading run: handles resolve only through its registry. */
  readonly runId: string;
  /** Deadline and cancellation of every read. */
  readonly call?: SpillwayCallOptions;
}

/** Searches whose last cursor an executor remembers; the least recently used is forgotten. */
const rememberedSearches = 64;

/**
 * createReadToolOutputExecutor returns the tool's executor. Given the model's arguments (an
 * object or its JSON text) it returns exactly the server-rendered window text. Bad arguments
 * and server refusals never throw: they return one short line for the model starting with
 * `error: ` (for a forged handle, `error: invalid_deferred_handle: …`). Its output is already
 * bounded by the server's caps and must go to the model as is — an ElisionPolicy given
 * toolName `read_tool_output` passes it through. Only errors that are not ConnectErrors
 * (programming faults) are thrown. Each read asks for the rendered text only
 * (`rendered_only`): the window's lines or matches are not sent a second time.
 *
 * The model pages a search with `skip`, as the rendered text tells it. The executor keeps the
 * trailer's search cursor of the last window of each search (handle, pattern, regex,
 * ignore_case; the 64 most recent) and sends it with a later page whose skip is at or past
 * it, so paging through every match reads the output about once instead of once per page.
 * The text is the same either way; a cursor the server refuses is dropped and the page read
 * again without it.
 */
export function createReadToolOutputExecutor(
  client: SpillwayClient,
  opts: ReadToolOutputExecutorOptions,
): (args: unknown, call?: SpillwayCallOptions) => Promise<string> {
  const run = createReadToolOutputRunner(client, opts);
  return async (args, call) => (await run(args, call)).text;
}

/**
 * ReadToolOutputOutcome is one `read_tool_output` call's text for the model and, for a refusal,
 * its gRPC code: the service's, or INVALID_ARGUMENT for arguments refused before any call.
 */
export interface ReadToolOutputOutcome {
  /** Exactly what createReadToolOutputExecutor returns for the same call. */
  readonly text: string;
  /** Undefined for a window; the refusal's code when `text` is an `error: ` line. */
  readonly code: Code | undefined;
}

/**
 * createReadToolOutputRunner is createReadToolOutputExecutor for hosts that relay the tool
 * (an MCP server, say) and must tell a refusal from a window without reading the text: each
 * call also gives the refusal's gRPC code.
 *
 * Both take a call's own options besides the executor's: its signal cancels that read as
 * well (the executor's still does; a cancelled read is an `error: ` line with CANCELED), and
 * its timeoutMs replaces the executor's.
 */
export function createReadToolOutputRunner(
  client: SpillwayClient,
  opts: ReadToolOutputExecutorOptions,
): (args: unknown, call?: SpillwayCallOptions) => Promise<ReadToolOutputOutcome> {
  const cursors = new Map<string, SearchCursor>();
  const read = async (request: Request, call: SpillwayCallOptions | undefined): Promise<Window> => {
    const window = request.window;
    if (window?.case !== "search") {
      return client.readToolOutput({ runId: opts.runId, ...request, renderedOnly: true }, call);
    }
    const search = window.value;
    const key = JSON.stringify([
      request.handle,
      search.pattern,
      search.regex,
      search.ignoreCase,
      request.keepAnsi === true,
    ]);
    const known = cursors.get(key);
    const usable = known !== undefined && known.matchesBefore <= (search.skip ?? 0n);
    const ask = (after: SearchCursor | undefined) =>
      client.readToolOutput(
        {
          runId: opts.runId,
          handle: request.handle,
          keepAnsi: request.keepAnsi,
          renderedOnly: true,
          window: {
            case: "search",
            value: {
              pattern: search.pattern,
              regex: search.regex,
              ignoreCase: search.ignoreCase,
              maxMatches: search.maxMatches,
              skip: search.skip,
              contextLines: search.contextLines,
              after,
            },
          },
        },
        call,
      );
    let result: Window;
    try {
      result = await ask(usable ? known : undefined);
    } catch (err) {
      if (
        !usable ||
        !(err instanceof ConnectError) ||
        !err.rawMessage.startsWith("search.after:")
      ) {
        throw err;
      }
      cursors.delete(key);
      result = await ask(undefined);
    }
    const next = result.trailer?.searchCursor;
    if (next !== undefined) {
      cursors.delete(key);
      cursors.set(key, next);
      if (cursors.size > rememberedSearches) cursors.delete(cursors.keys().next().value ?? key);
    }
    return result;
  };
  return async (args, call) => {
    const parsed = parseArgs(args);
    if (typeof parsed === "string") return { text: `error: ${parsed}`, code: Code.InvalidArgument };
    try {
      return { text: (await read(parsed, callOptions(opts.call, call))).rendered, code: undefined };
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      return { text: `error: ${describeError(err)}`, code: err.code };
    }
  };
}

type Request = MessageInitShape<typeof ReadToolOutputRequestSchema> & { handle: string };

const known = new Set(Object.keys(readToolOutputTool.parameters.properties as object));

/** Arguments of other windows, which a JSONPath query does not take. */
const jsonPathExcludes = [
  "pattern",
  "regex",
  "ignore_case",
  "context",
  "offset",
  "from_end",
  "bytes",
  "json",
  "mode",
];

/** parseArgs maps the model's arguments to a request, or says in a short sentence what is wrong. */
function parseArgs(input: unknown): Request | string {
  let args = input;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      return "arguments are not valid JSON";
    }
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return "arguments must be an object with a handle";
  }
  const a = args as Record<string, unknown>;
  const unknownKey = Object.keys(a).find((k) => !known.has(k));
  if (unknownKey !== undefined) return `unknown argument ${JSON.stringify(unknownKey)}`;
  if (typeof a.handle !== "string" || a.handle === "") return "handle must be a non-empty string";
  const problem =
    checkInt(a, "offset", 0) ??
    checkInt(a, "limit", 1) ??
    checkInt(a, "context", 0, 20) ??
    checkInt(a, "skip", 0) ??
    checkBool(a, "from_end") ??
    checkBool(a, "regex") ??
    checkBool(a, "ignore_case") ??
    checkBool(a, "bytes") ??
    checkBool(a, "json") ??
    checkBool(a, "keep_ansi");
  if (problem !== undefined) return problem;
  if (a.mode !== undefined && a.mode !== "lines" && a.mode !== "bytes" && a.mode !== "json") {
    return 'mode must be "lines", "bytes" or "json"';
  }
  const offset = a.offset as number | undefined;
  const limit = a.limit as number | undefined;
  // Lines and matches limits are int32 on the wire; the server caps windows far below anyway.
  const smallLimit = limit === undefined ? undefined : Math.min(limit, 2 ** 31 - 1);
  const bytes = a.bytes === true || a.mode === "bytes";
  const json = a.json === true || a.mode === "json";
  if (bytes && json) return "bytes and json cannot be combined";
  const searchOnly = ["regex", "ignore_case", "context", "skip"].find((k) => a[k] !== undefined);
  const keepAnsi = a.keep_ansi === true ? { keepAnsi: true } : {};
  if (a.jsonpath !== undefined) {
    if (typeof a.jsonpath !== "string" || a.jsonpath === "") {
      return "jsonpath must be a non-empty string";
    }
    const other = jsonPathExcludes.find((k) => a[k] !== undefined);
    if (other !== undefined) {
      return `jsonpath cannot be combined with ${other} (use skip and limit to page nodes)`;
    }
    return {
      handle: a.handle,
      window: {
        case: "jsonPath",
        value: {
          query: a.jsonpath,
          maxMatches: smallLimit,
          skip: BigInt((a.skip as number | undefined) ?? 0),
        },
      },
      ...keepAnsi,
    };
  }
  if (a.pattern !== undefined) {
    if (typeof a.pattern !== "string" || a.pattern === "") {
      return "pattern must be a non-empty string";
    }
    if (json) return "pattern cannot be combined with json";
    if (bytes || a.from_end !== undefined || offset !== undefined) {
      return "pattern cannot be combined with bytes, from_end or offset (use skip to page matches)";
    }
    return {
      handle: a.handle,
      ...keepAnsi,
      window: {
        case: "search",
        value: {
          pattern: a.pattern,
          regex: a.regex === true,
          ignoreCase: a.ignore_case === true,
          maxMatches: smallLimit,
          skip: BigInt((a.skip as number | undefined) ?? 0),
          contextLines: (a.context as number | undefined) ?? 0,
        },
      },
    };
  }
  if (searchOnly !== undefined) return `${searchOnly} needs a pattern`;
  if (bytes) {
    if (a.from_end !== undefined) return "from_end applies to lines, not bytes";
    return {
      handle: a.handle,
      ...keepAnsi,
      window: {
        case: "bytes",
        value: {
          offset: BigInt(offset ?? 0),
          limit: limit === undefined ? undefined : BigInt(limit),
        },
      },
    };
  }
  if (json) {
    return {
      handle: a.handle,
      ...keepAnsi,
      window: {
        case: "json",
        value: { offset: BigInt(offset ?? 0), limit: smallLimit, fromEnd: a.from_end === true },
      },
    };
  }
  return {
    handle: a.handle,
    ...keepAnsi,
    window: {
      case: "lines",
      value: { offset: BigInt(offset ?? 0), limit: smallLimit, fromEnd: a.from_end === true },
    },
  };
}

function checkInt(
  a: Record<string, unknown>,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): string | undefined {
  const v = a[name];
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
    return max === Number.MAX_SAFE_INTEGER
      ? `${name} must be an integer >= ${min}`
      : `${name} must be an integer from ${min} to ${max}`;
  }
  return undefined;
}

function checkBool(a: Record<string, unknown>, name: string): string | undefined {
  const v = a[name];
  return v === undefined || typeof v === "boolean" ? undefined : `${name} must be true or false`;
}

/** describeError names the ErrorInfo reason (or else the code) and the server's message. */
function describeError(err: ConnectError): string {
  const reason = err.findDetails(ErrorInfoSchema)[0]?.reason;
  if (reason !== undefined && reason !== "") {
    // The server's messages for reasoned errors already start with the reason.
    return err.rawMessage.startsWith(`${reason}:`)
      ? err.rawMessage
      : `${reason}: ${err.rawMessage}`;
  }
  return `${statusName(err.code).toLowerCase()}: ${err.rawMessage}`;
}

/** The options of one read: the executor's and the call's, signals combined. */
function callOptions(
  base: SpillwayCallOptions | undefined,
  call: SpillwayCallOptions | undefined,
): SpillwayCallOptions | undefined {
  if (call === undefined) return base;
  if (base === undefined) return call;
  const signals = [base.signal, call.signal].filter((s) => s !== undefined);
  const timeoutMs = call.timeoutMs ?? base.timeoutMs;
  return {
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    ...(signals.length === 0
      ? {}
      : { signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals) }),
  };
}
