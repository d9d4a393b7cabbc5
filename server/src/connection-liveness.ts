import type { ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";

/** ConnectionLiveness bounds how long a connection may stay open without doing anything. */
export interface ConnectionLiveness {
  /** GOAWAY (graceful close) once a connection has had no open stream this long; 0: never. */
  readonly idleMs: number;
  /** A PING is sent every keepaliveMs on each connection; 0: no keepalive. */
  readonly keepaliveMs: number;
  /** A connection whose peer does not acknowledge a PING within this long is destroyed. */
  readonly keepaliveTimeoutMs: number;
}

/** defaultConnectionLiveness: idle connections close after 5 min; PING every 60 s, 20 s to answer. */
export const defaultConnectionLiveness: ConnectionLiveness = {
  idleMs: 5 * 60_000,
  keepaliveMs: 60_000,
  keepaliveTimeoutMs: 20_000,
};

/**
 * watchConnection applies `liveness` to one HTTP/2 session for as long as it lives:
 * - a session with no open stream for `idleMs` (counted from its start or from the close of its
 *   last stream) is closed gracefully: GOAWAY, and the connection ends; clients open a new one
 *   for their next call;
 * - every `keepaliveMs` the server sends a PING (only one at a time); when the peer does not
 *   acknowledge it within `keepaliveTimeoutMs` the session and its socket are destroyed, so a
 *   peer that vanished (host down, cable pulled, a client that stopped reading its socket) does
 *   not keep its streams, their call slots and its socket open until TCP gives up;
 * - a session whose peer is gone (the connection was reset, or closed with responses unread)
 *   is destroyed the first time one of its streams drains, so every call on it ends there
 *   and then (see below).
 * Every timer is cleared when the session closes.
 */
export function watchConnection(session: ServerHttp2Session, liveness: ConnectionLiveness): void {
  let open = 0;
  let idle: NodeJS.Timeout | undefined;
  const armIdle = () => {
    if (liveness.idleMs > 0) idle = setTimeout(() => session.close(), liveness.idleMs).unref();
  };
  armIdle();
  // Node completes a stream's writes as done when the socket write carrying them failed (its
  // session passes 0, not the error: ClearOutgoing in node_http2.cc), and reads no more from a
  // socket while a write to it is in progress. So when a client that had stopped reading
  // resets its connection, every stalled response drains at once and keeps draining, and its
  // call keeps producing, until the session gets round to reading the reset: 200 bulk readers
  // on 4 connections read 5.9 MiB each from the store after theirs were dropped. A drain is
  // where that begins, and the kernel knows by then: getpeername fails once the peer is gone.
  const endIfPeerGone = () => {
    if (peerGone(session)) session.destroy();
  };
  session.on("stream", (stream) => {
    open++;
    clearTimeout(idle);
    stream.on("drain", endIfPeerGone);
    stream.once("close", () => {
      if (--open === 0 && !session.closed && !session.destroyed) armIdle();
    });
  });

  let unanswered: NodeJS.Timeout | undefined;
  const ping = () => {
    if (unanswered !== undefined || session.closed || session.destroyed) return;
    unanswered = setTimeout(() => session.destroy(), liveness.keepaliveTimeoutMs).unref();
    try {
      session.ping(() => {
        // An answer, or the session went away (the ping is cancelled): either way it is over.
        clearTimeout(unanswered);
        unanswered = undefined;
      });
    } catch {
      // The session closed between the check and the ping.
      clearTimeout(unanswered);
      unanswered = undefined;
    }
  };
  const keepalive =
    liveness.keepaliveMs > 0 ? setInterval(ping, liveness.keepaliveMs).unref() : undefined;
  session.once("close", () => {
    clearTimeout(idle);
    clearTimeout(unanswered);
    clearInterval(keepalive);
  });
}

/**
 * peerGone reports whether the session's TCP connection has no peer any more: the kernel fails
 * getpeername with ENOTCONN once the connection was reset, which a peer that closed with data
 * unread, or that gets data after closing, does. Node's socket caches its peer's address, so
 * this asks the socket's handle (TCP, or TLS, which asks its TCP socket's).
 */
function peerGone(session: ServerHttp2Session): boolean {
  if (session.destroyed) return false;
  const handle = (session.socket as { _handle?: PeerNameHandle | null })._handle;
  if (typeof handle?.getpeername !== "function") return false;
  return handle.getpeername({}) !== 0;
}

/** The part of Node's socket handles peerGone uses: 0, or a negative errno. */
interface PeerNameHandle {
  getpeername(out: object): number;
}

/**
 * watchHttp1Connection applies `liveness.idleMs` to an HTTP/1.1 connection (TLS clients that do
 * not speak HTTP/2, such as some gRPC-Web proxies): one on which no byte moves either way for that
 * long is destroyed. HTTP/1.1 has no PING, so silence is all a server can go by; the connection's
 * requests end with it.
 */
export function watchHttp1Connection(socket: Socket, liveness: ConnectionLiveness): void {
  if (liveness.idleMs === 0) return;
  socket.setTimeout(liveness.idleMs);
  socket.on("timeout", () => socket.destroy());
}
