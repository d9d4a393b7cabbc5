import { createServer } from "node:http2";

/**
 * A bare node:http2 server, the floor a gRPC call over HTTP/2 is measured against: every
 * request's body is read and answered `200` with two bytes, nothing else (no routing, no
 * framing, no trailers). Run in its own process, as Spillway runs in its own; prints its port.
 */
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/octet-stream" });
    res.end("ok");
  });
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${typeof address === "object" && address !== null ? address.port : 0}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
