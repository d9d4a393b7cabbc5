import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createSpillwayClient } from "@spillway/client";
import { mcpUsage, parseMcpOptions } from "./options.js";
import { createSpillwayMcpServer } from "./spillway-mcp-server.js";
import { serveStreamableHttp } from "./streamable-http.js";

/**
 * runMcp runs `spillway-mcp` with `argv` (the arguments after the command). Over stdio it
 * serves until stdin ends; over HTTP until SIGINT or SIGTERM, after writing one JSON line
 * `{"msg":"listening","url":...}` to stderr (stdout stays free). A bad command line prints the
 * usage to stderr and sets exit code 2. Diagnostics only ever go to stderr: over stdio, stdout
 * is the protocol.
 */
export async function runMcp(argv: readonly string[]): Promise<void> {
  const opts = parseMcpOptions(argv, process.env);
  if (opts === "help") {
    process.stdout.write(mcpUsage);
    return;
  }
  if ("usageError" in opts) {
    process.stderr.write(`spillway-mcp: ${opts.usageError}\n${mcpUsage}`);
    process.exitCode = 2;
    return;
  }
  const client = createSpillwayClient({
    baseUrl: opts.spillwayUrl,
    ...(opts.token === undefined ? {} : { token: opts.token }),
  });
  const newServer = createSpillwayMcpServer(client, {
    runId: opts.runId,
    timeoutMs: opts.timeoutMs,
  });
  if (opts.transport === "stdio") {
    const server = newServer();
    await server.connect(new StdioServerTransport());
    // The SDK's stdio transport does not notice the host closing stdin; the process then
    // must end, or a host that restarts the server would leave this one behind.
    process.stdin.once("end", () => void server.close().finally(() => process.exit(0)));
    return;
  }
  const endpoint = await serveStreamableHttp(newServer, opts.host, opts.port);
  process.stderr.write(`${JSON.stringify({ msg: "listening", url: endpoint.url })}\n`);
  const stop = () => endpoint.http.close(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

/** runMain is the `spillway-mcp` bin: runMcp on process.argv, any fault printed with exit 1. */
export function runMain(): void {
  runMcp(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`spillway-mcp: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
