import { connect, createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { http2Preface, routePreface } from "./preface-router.js";

/** What a route saw: which one it was, and every byte the socket gave it afterwards. */
interface Routed {
  readonly route: "http2" | "http1";
  readonly bytes: Promise<Buffer>;
}

let server: Server | undefined;
afterEach(() => server?.close());

/** A loopback listener that routes each connection, reporting the route and what it then read. */
async function listen(decideMs: number): Promise<{ port: number; routed: Promise<Routed> }> {
  let report: (r: Routed) => void = () => undefined;
  const routed = new Promise<Routed>((resolve) => {
    report = resolve;
  });
  const take = (route: Routed["route"]) => (socket: Socket) => {
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    report({
      route,
      bytes: new Promise((resolve) => socket.once("end", () => resolve(Buffer.concat(chunks)))),
    });
  };
  server = createServer((socket) =>
    routePreface(socket, decideMs, { http2: take("http2"), http1: take("http1") }),
  );
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { port: typeof address === "object" && address !== null ? address.port : 0, routed };
}

/** Connects and writes `parts` one after another, a few ms apart, then ends the connection. */
async function send(port: number, parts: readonly Buffer[]): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  await new Promise((resolve) => socket.once("connect", resolve));
  for (const part of parts) {
    socket.write(part);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  socket.end();
  return socket;
}

describe("routePreface", () => {
  it("hands a connection that starts with the HTTP/2 preface, one byte at a time, to HTTP/2 with every byte", async () => {
    const { port, routed } = await listen(5_000);
    const frame = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const parts = [...http2Preface].map((b) => Buffer.from([b]));
    await send(port, [...parts, frame]);
    const r = await routed;
    expect(r.route).toBe("http2");
    expect(await r.bytes).toEqual(Buffer.concat([http2Preface, frame]));
  });

  it("hands anything else to HTTP/1.1 as soon as it differs, the bytes read put back", async () => {
    const { port, routed } = await listen(5_000);
    // "P" and "PO" could still be the preface; "POS" cannot.
    const request = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    await send(port, [Buffer.from("P"), Buffer.from("O"), Buffer.from(request.slice(2))]);
    const r = await routed;
    expect(r.route).toBe("http1");
    expect((await r.bytes).toString()).toBe(request);
  });

  it("closes a connection that has not told within decideMs", async () => {
    const { port } = await listen(200);
    const started = Date.now();
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => undefined);
    socket.write("PRI * HTTP/2");
    await new Promise((resolve) => socket.once("close", resolve));
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
