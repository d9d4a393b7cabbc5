import { randomBytes } from "node:crypto";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { runBin, runnableOrExit } from "./cli-entry.js";
import { parseCliFlags } from "./cli-flags.js";
import { startMcpProxy } from "./mcp-proxy.js";

/** mcpProxyUsage is the `spillway-mcp-proxy --help` text. */
export const mcpProxyUsage = `Usage: spillway-mcp-proxy [flags] -- <command> [args...]

Runs an MCP server (stdio) as a child and relays everything between it and the MCP host on this
process's stdin and stdout. A tool result longer than the band is stored in Spillway whole; the
host gets the server-rendered preview naming its handle and a resource_link, and the tool
read_tool_output to read it in windows.

  --url <url>            SPILLWAY_URL             Spillway service (default http://127.0.0.1:50051)
  --token-file <path>    SPILLWAY_TOKEN           bearer token (the variable holds the token itself)
  --tenant <name>        SPILLWAY_TENANT          tenant of the offloads (default: the token's,
                                                  as the service reports it)
  --run <id>             SPILLWAY_RUN_ID          run the results go to (default mcp-proxy-<random>)
  --band <chars>         SPILLWAY_MCP_BAND        offload results longer than this (default 20000)
  --timeout-ms <n>       SPILLWAY_MCP_TIMEOUT_MS  deadline of each Spillway call (default 30000)
  -h, --help
`;

/**
 * The largest message the wrapped server may send. Large results are what the proxy is for; the
 * SDK's default (10 MiB) dropped a bigger result and the host waited for it forever. V8's
 * longest string (about 512 Mi UTF-16 units) bounds what one message can be parsed from.
 */
const maxServerMessageBytes = 256 * 1024 * 1024;

/** McpProxyConfig is the parsed `spillway-mcp-proxy` command line. */
export interface McpProxyConfig {
  readonly spillwayUrl: string;
  readonly token: string | undefined;
  /** The offloads' tenant; undefined: the one the service reports for the token. */
  readonly tenant: string | undefined;
  readonly runId: string;
  readonly bandChars: number;
  readonly timeoutMs: number;
  readonly command: string;
  readonly args: readonly string[];
}

/**
 * parseMcpProxyArgs reads the flags before `--` (over the environment) and the command after
 * it. It returns a usage error naming the flag instead of throwing.
 */
export function parseMcpProxyArgs(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): McpProxyConfig | { usageError: string } | "help" {
  const dash = argv.indexOf("--");
  const own = dash === -1 ? argv : argv.slice(0, dash);
  const flags = parseCliFlags(own, env, ["url", "tenant", "run", "band", "timeout-ms"]);
  if ("usageError" in flags) return flags;
  if (flags.help) return "help";
  const [command, ...args] = dash === -1 ? [] : argv.slice(dash + 1);
  if (command === undefined) return { usageError: "no server command after --" };
  const { str } = flags;
  const unbounded = Number.MAX_SAFE_INTEGER;
  const bandChars = flags.whole("band", "SPILLWAY_MCP_BAND", 20_000, 1, unbounded);
  if (typeof bandChars === "string") return { usageError: bandChars };
  const timeoutMs = flags.whole("timeout-ms", "SPILLWAY_MCP_TIMEOUT_MS", 30_000, 1, unbounded);
  if (typeof timeoutMs === "string") return { usageError: timeoutMs };
  const token = flags.token();
  if (typeof token === "object") return token;
  return {
    spillwayUrl: str("url", "SPILLWAY_URL") ?? "http://127.0.0.1:50051",
    token,
    tenant: str("tenant", "SPILLWAY_TENANT"),
    runId: str("run", "SPILLWAY_RUN_ID") ?? `mcp-proxy-${randomBytes(6).toString("hex")}`,
    bandChars,
    timeoutMs,
    command,
    args,
  };
}

/**
 * tokenTenant asks the service which tenant the client's token names (GetServerInfo), so the
 * offload keys name it without the operator saying it twice. An unreachable service leaves
 * `dev`, with a warning: results then pass through whole until it answers as that tenant.
 */
async function tokenTenant(
  client: SpillwayClient,
  timeoutMs: number,
  warn: (message: string) => void,
): Promise<string> {
  try {
    return (await client.serverInfo({ timeoutMs })).tenant;
  } catch (err) {
    warn(`cannot ask the service for the token's tenant (${String(err)}); offloading as "dev"`);
    return "dev";
  }
}

/**
 * runMcpProxy runs `spillway-mcp-proxy` with `argv`: it spawns the command (its stderr goes to
 * this process's; its environment is this one's without SPILLWAY_TOKEN, which the wrapped
 * server has no use for) and relays until the host or the server goes away, then exits. A bad
 * command line prints the usage to stderr and sets exit code 2.
 */
export async function runMcpProxy(argv: readonly string[]): Promise<void> {
  const config = runnableOrExit(
    "spillway-mcp-proxy",
    mcpProxyUsage,
    parseMcpProxyArgs(argv, process.env),
  );
  if (config === undefined) return;
  const { SPILLWAY_TOKEN: _, ...childEnv } = process.env;
  const client = createSpillwayClient({
    baseUrl: config.spillwayUrl,
    ...(config.token === undefined ? {} : { token: config.token }),
  });
  const warn = (message: string) => process.stderr.write(`spillway-mcp-proxy: ${message}\n`);
  const proxy = await startMcpProxy({
    client,
    tenant: config.tenant ?? (await tokenTenant(client, config.timeoutMs, warn)),
    runId: config.runId,
    bandChars: config.bandChars,
    timeoutMs: config.timeoutMs,
    host: new StdioServerTransport(),
    child: new StdioClientTransport({
      command: config.command,
      args: [...config.args],
      env: Object.fromEntries(
        Object.entries(childEnv).filter((e): e is [string, string] => e[1] !== undefined),
      ),
      stderr: "inherit",
      maxBufferSize: maxServerMessageBytes,
    }),
    warn,
  });
  process.stdin.once("end", () => void proxy.close());
  await proxy.closed;
  process.exit(0);
}

/** runProxyMain is the `spillway-mcp-proxy` bin: runMcpProxy on process.argv, faults exit 1. */
export function runProxyMain(): void {
  runBin("spillway-mcp-proxy", runMcpProxy);
}
