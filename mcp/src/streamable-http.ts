import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isLoopbackHostHeader, isLoopbackName } from "@spillway/wire";

/** StreamableHttpEndpoint is a listening MCP endpoint. */
export interface StreamableHttpEndpoint {
  /** `http://<host>:<port>/mcp`, the URL an MCP host connects to. */
  readonly url: string;
  /** The HTTP server, for closing. */
  readonly http: HttpServer;
}

/**
 * loopbackOrigin says whether a request's Origin is absent (not a browser) or a page served
 * from this machine's loopback: the MCP specification wants a server to validate Origin, and a
 * page elsewhere (or an opaque `null` origin) has no business with a local Spillway token.
 */
function loopbackOrigin(origin: string | undefined): boolean {
  if (origin === undefined) return true;
  try {
    return isLoopbackName(new URL(origin).hostname);
  } catch {
    return false;
  }
}

/**
 * serveStreamableHttp listens on `host:port` and answers MCP's Streamable HTTP transport at
 * `/mcp`, statelessly: each POST gets a fresh server from `newServer` (no sessions to leak or
 * expire), answered as JSON. GET and DELETE (server-initiated streams and session ends) are
 * 405, as the specification allows a stateless server; any other path is 404.
 *
 * On a loopback host (any address of 127.0.0.0/8, `::1`, `localhost`) the Host header must name
 * a loopback address or name (DNS-rebinding protection: a rebound page sends its own name) and
 * an Origin header, if any, must be a loopback one (403 otherwise), so a web page cannot reach
 * the Spillway token through the browser.
 */
export async function serveStreamableHttp(
  newServer: () => Server,
  host: string,
  port: number,
): Promise<StreamableHttpEndpoint> {
  // Any loopback address, not only 127.0.0.1: a page that rebinds a name to 127.0.0.2 reaches it.
  const guarded = isLoopbackName(host);
  const http = createServer((req, res) => {
    if (new URL(req.url ?? "/", "http://x").pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405, { allow: "POST" }).end();
      return;
    }
    if (
      guarded &&
      (!isLoopbackHostHeader(req.headers.host) || !loopbackOrigin(req.headers.origin))
    ) {
      res.writeHead(403).end();
      return;
    }
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(err));
      });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, host, () => resolve());
  });
  const bound = (http.address() as AddressInfo).port;
  const shown = host.includes(":") ? `[${host}]` : host;
  return { url: `http://${shown}:${bound}/mcp`, http };
}
