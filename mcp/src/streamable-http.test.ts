import { request } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { serveStreamableHttp } from "./streamable-http.js";

/** An MCP server with no tools: enough to tell a refused request from an answered one. */
const emptyServer = () => {
  const server = new Server({ name: "empty", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [] }));
  return server;
};

/** POSTs tools/list to `url` with the given Host and Origin headers; resolves the status. */
function post(url: string, headers: Record<string, string>): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers,
      },
    });
    req.once("response", (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.once("error", reject);
    req.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }));
  });
}

describe("serveStreamableHttp on a loopback address", () => {
  it("refuses a rebound page's Host and Origin on any loopback address, not only 127.0.0.1", async () => {
    // 127.0.0.2 is loopback too: the checks used to apply to 127.0.0.1, localhost and ::1 only.
    for (const host of ["127.0.0.1", "127.0.0.2"]) {
      const { url, http } = await serveStreamableHttp(emptyServer, host, 0);
      try {
        const port = new URL(url).port;
        expect(await post(url, { host: `attacker.example:${port}` }), host).toBe(403);
        expect(
          await post(url, { host: `${host}:${port}`, origin: `http://attacker.example:${port}` }),
          host,
        ).toBe(403);
        expect(await post(url, { host: `${host}:${port}` }), host).toBe(200);
        expect(
          await post(url, { host: `localhost:${port}`, origin: "http://localhost" }),
          host,
        ).toBe(200);
      } finally {
        await new Promise((resolve) => http.close(resolve));
      }
    }
  });
});
