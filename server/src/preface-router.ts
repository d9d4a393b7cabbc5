import type { Socket } from "node:net";

/** The client connection preface every HTTP/2 connection starts with (RFC 9113 §3.4). */
export const http2Preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** PrefaceRoutes say where routePreface hands an accepted socket once it knows its protocol. */
export interface PrefaceRoutes {
  /** The socket began with the HTTP/2 preface (h2c with prior knowledge). */
  readonly http2: (socket: Socket) => void;
  /** The socket began with anything else: an HTTP/1.x request line, or garbage for its parser. */
  readonly http1: (socket: Socket) => void;
}

/**
 * routePreface reads an accepted plaintext socket only as far as it takes to tell HTTP/2 from
 * HTTP/1.1 (at most the 24 bytes of the HTTP/2 preface; an HTTP/1.1 method differs from `PRI`
 * within its first three), puts those bytes back and hands the socket to its route, which reads
 * them as if nothing had been read. A socket that has not told within decideMs (a client that
 * connects and sends nothing, or one byte) is destroyed, so it holds a file descriptor for at most
 * that long; one that closes or fails first is let go of.
 */
export function routePreface(socket: Socket, decideMs: number, routes: PrefaceRoutes): void {
  let seen: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(), decideMs).unref();
  const done = () => {
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("error", onError);
    socket.off("close", onClose);
  };
  const onError = () => done();
  const onClose = () => done();
  const onData = (chunk: Buffer) => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const compared = Math.min(seen.length, http2Preface.length);
    const http2 = seen.subarray(0, compared).equals(http2Preface.subarray(0, compared));
    if (http2 && seen.length < http2Preface.length) return;
    done();
    socket.pause();
    socket.unshift(seen);
    if (http2) routes.http2(socket);
    else routes.http1(socket);
    // The route has attached its readers; the bytes put back reach them first.
    process.nextTick(() => socket.resume());
  };
  socket.on("data", onData);
  socket.on("error", onError);
  socket.on("close", onClose);
}
