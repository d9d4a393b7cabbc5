import { connect, type Socket } from "node:net";

/** RawExchange is what a raw TCP client saw: the bytes it got, and when and how it ended. */
export interface RawExchange {
  /** Everything the server sent, as latin1 text. */
  readonly text: string;
  /** Milliseconds from connecting until the server closed the connection (or the wait ended). */
  readonly ms: number;
  /** True when the server closed the connection; false when the wait ran out first. */
  readonly closed: boolean;
}

/**
 * rawExchange connects to url's host and port, lets `drive` write what it wants (all at once,
 * byte by byte, nothing), and collects what the server sends until it closes the connection or
 * waitMs passes; the socket is destroyed either way.
 */
export function rawExchange(
  url: string,
  drive: (socket: Socket) => void,
  waitMs: number,
): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    const socket = connect({ host: hostname, port: Number(port) }, () => drive(socket));
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString("latin1"), ms: Date.now() - started, closed });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", () => undefined);
    socket.on("close", () => finish(true));
  });
}

/** connectJsonRequest is an HTTP/1.1 Connect unary request with a JSON body, as bytes to write. */
export function connectJsonRequest(
  path: string,
  body: string,
  headers: Record<string, string> = {},
): string {
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  return (
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`
  );
}
