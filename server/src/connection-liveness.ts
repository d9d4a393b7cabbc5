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
 *   not keep its streams, their call slots and its socket open until TCP gives up.
 * Every timer is cleared when the session closes.
 */
export function watchConnection(session: ServerHttp2Session, liveness: ConnectionLiveness): void {
  let open = 0;
  let idle: NodeJS.Timeout | undefined;
  const armIdle = () => {
    if (liveness.idleMs > 0) idle = setTimeout(() => session.close(), liveness.idleMs).unref();
  };
  armIdle();
  session.on("stream", (stream) => {
    open++;
    clearTimeout(idle);
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
