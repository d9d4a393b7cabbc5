import * as http from "node:http";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createHttp1Connections, MAX_PIPELINED_REQUESTS } from "./http1-connections.js";
import { HTTP1_PIECE_BYTES } from "./http1-pieces.js";

let server: http.Server | undefined;
afterEach(() => server?.close());

/**
 * A loopback HTTP/1.1 server whose requests go through createHttp1Connections: `/hold` starts a
 * response that never ends, anything else is answered at once. It counts the requests Node's
 * parser built, served or not.
 */
async function listen() {
  const connections = createHttp1Connections(0);
  const seen = { parsed: 0, served: 0 };
  server = http.createServer((req, res) => {
    seen.parsed++;
    connections.request(req, res, () => {
      seen.served++;
      if (req.url === "/hold") res.writeHead(200).write("held\n");
      else res.end("ok\n");
    });
  });
  server.on("connection", (socket) => connections.add(socket));
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { port, seen };
}

const request = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;

/** Writes `bytes` in one write and resolves once the server has closed the connection. */
function sendAndWaitClose(port: number, bytes: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(bytes));
    socket.on("data", () => undefined);
    socket.on("error", () => undefined);
    socket.on("close", () => resolve());
  });
}

describe("createHttp1Connections", () => {
  it("closes a connection that pipelines a flood behind a response in progress, parsing little of it", async () => {
    const { port, seen } = await listen();
    // About 2,500 requests in one 64 KiB write: Node's parser, fed the whole read, would build
    // a request and a response for every one before the connection could be closed.
    const flood = request("/hold") + request("/").repeat(2_500);
    await sendAndWaitClose(port, flood);
    expect(seen.served).toBe(1);
    const perPiece = Math.ceil(HTTP1_PIECE_BYTES / request("/").length);
    expect(seen.parsed).toBeLessThanOrEqual(1 + MAX_PIPELINED_REQUESTS + perPiece);
  });

  it("serves requests pipelined in one write in order, each once the one before has ended", async () => {
    const { port, seen } = await listen();
    const text = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      const socket = connect(port, "127.0.0.1", () =>
        socket.write(
          request("/a").repeat(40) +
            request("/b").replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"),
        ),
      );
      socket.on("data", (c: Buffer) => chunks.push(c));
      socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
    });
    expect([...text.matchAll(/HTTP\/1\.1 200/g)]).toHaveLength(41);
    expect(seen.served).toBe(41);
  });
});
