import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { createSpillwayClient } from "@spillway/client";
import { runBin, runnableOrExit } from "./cli-entry.js";
import { mcpUsage, parseMcpOptions } from "./options.js";
import { createSpillwayMcpServer } from "./spillway-mcp-server.js";
import { serveStreamableHttp } from "./streamable-http.js";

/**
 * runMcp runs `spillway-mcp` with `argv` (the arguments after the command). Over stdio it
 * serves until stdin ends and every request read before then is answered; over HTTP until SIGINT or SIGTERM, after writing one JSON line
 * `{"msg":"listening","url":...}` to stderr (stdout stays free). A bad command line prints the
 * usage to stderr and sets exit code 2. Diagnostics only ever go to stderr: over stdio, stdout
 * is the protocol.
 */
export async function runMcp(argv: readonly string[]): Promise<void> {
  const opts = runnableOrExit("spillway-mcp", mcpUsage, parseMcpOptions(argv, process.env));
  if (opts === undefined) return;
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
    const transport = new StdioServerTransport();
    await server.connect(transport);
    // The SDK's stdio transport does not notice the host closing stdin; the process then
    // must end, or a host that restarts the server would leave this one behind. It ends once
    // the requests already read are answered, so a host that writes and closes (a pipe)
    // still gets every answer.
    const unanswered = new Set<string | number>();
    let ended = false;
    const exitIfDone = () => {
      if (ended && unanswered.size === 0) void server.close().finally(() => process.exit(0));
    };
    const received = transport.onmessage;
    transport.onmessage = (message: JSONRPCMessage) => {
      if ("method" in message && "id" in message) unanswered.add(message.id);
      // A cancelled request gets no answer from the SDK's server, so none is waited for.
      if ("method" in message && message.method === "notifications/cancelled") {
        const cancelled = (message.params as { requestId?: string | number } | undefined)
          ?.requestId;
        if (cancelled !== undefined) unanswered.delete(cancelled);
        received?.(message);
        exitIfDone();
        return;
      }
      received?.(message);
    };
    const send = transport.send.bind(transport);
    transport.send = async (message: JSONRPCMessage) => {
      try {
        await send(message);
      } finally {
        // An answer that could not be written (the host is gone) is not waited for either.
        if (!("method" in message) && "id" in message && message.id !== undefined) {
          unanswered.delete(message.id);
          exitIfDone();
        }
      }
    };
    process.stdin.once("end", () => {
      ended = true;
      exitIfDone();
    });
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
  runBin("spillway-mcp", runMcp);
}
