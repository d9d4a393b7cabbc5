import { parseCliFlags } from "./cli-flags.js";

/** McpOptions is the `spillway-mcp` configuration, from flags over environment variables. */
export interface McpOptions {
  /** The Spillway service, `--url` or `SPILLWAY_URL` (default `http://127.0.0.1:50051`). */
  readonly spillwayUrl: string;
  /** Bearer token for the service: `SPILLWAY_TOKEN`, or the first line of `--token-file`. */
  readonly token: string | undefined;
  /** The run read when a tool call names none and whose outputs resources/list shows: `--run` or `SPILLWAY_RUN_ID`. */
  readonly runId: string | undefined;
  /** `stdio` (default) or `http` (Streamable HTTP), `--transport` or `SPILLWAY_MCP_TRANSPORT`. */
  readonly transport: "stdio" | "http";
  /** Streamable HTTP listen address, `--host` or `SPILLWAY_MCP_HOST` (default 127.0.0.1). */
  readonly host: string;
  /** Streamable HTTP port, `--port` or `SPILLWAY_MCP_PORT` (default 3334; 0 picks a free one). */
  readonly port: number;
  /** Deadline of each Spillway call in milliseconds, `--timeout-ms` (default 30000). */
  readonly timeoutMs: number;
}

/** mcpUsage is the `spillway-mcp --help` text. */
export const mcpUsage = `Usage: spillway-mcp [flags]

An MCP server in front of a Spillway service: the tools read_tool_output, list_tool_outputs,
stat_tool_output and list_runs, and every stored output as the resource
spillway://<run>/<handle>.

  --url <url>            SPILLWAY_URL             Spillway service (default http://127.0.0.1:50051)
  --token-file <path>    SPILLWAY_TOKEN           bearer token (the variable holds the token itself)
  --run <id>             SPILLWAY_RUN_ID          default run for tools; the run resources/list shows
  --transport <t>        SPILLWAY_MCP_TRANSPORT   stdio (default) or http (Streamable HTTP)
  --host <host>          SPILLWAY_MCP_HOST        HTTP listen address (default 127.0.0.1)
  --port <n>             SPILLWAY_MCP_PORT        HTTP port (default 3334, 0 picks a free port)
  --timeout-ms <n>       SPILLWAY_MCP_TIMEOUT_MS  deadline of each Spillway call (default 30000)
  -h, --help
`;

/** McpUsageError is a bad command line: the CLI prints it with the usage and exits 2. */
export interface McpUsageError {
  readonly usageError: string;
}

/**
 * parseMcpOptions reads the command line and the environment. It returns a usage error (never
 * throws for bad input) naming the flag, so the CLI can exit 2 before anything starts.
 */
export function parseMcpOptions(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): McpOptions | McpUsageError | "help" {
  const flags = parseCliFlags(argv, env, ["url", "run", "transport", "host", "port", "timeout-ms"]);
  if ("usageError" in flags) return flags;
  if (flags.help) return "help";
  const { str } = flags;
  const transport = str("transport", "SPILLWAY_MCP_TRANSPORT") ?? "stdio";
  if (transport !== "stdio" && transport !== "http") {
    return { usageError: `--transport: expected stdio or http, got ${JSON.stringify(transport)}` };
  }
  const port = flags.whole("port", "SPILLWAY_MCP_PORT", 3334, 0, 65_535);
  if (typeof port === "string") return { usageError: port };
  const timeoutMs = flags.whole("timeout-ms", "SPILLWAY_MCP_TIMEOUT_MS", 30_000, 0, 2 ** 31 - 1);
  if (typeof timeoutMs === "string") return { usageError: timeoutMs };
  const token = flags.token();
  if (typeof token === "object") return token;
  return {
    spillwayUrl: str("url", "SPILLWAY_URL") ?? "http://127.0.0.1:50051",
    token,
    runId: str("run", "SPILLWAY_RUN_ID"),
    transport,
    host: str("host", "SPILLWAY_MCP_HOST") ?? "127.0.0.1",
    port,
    timeoutMs,
  };
}
