import type * as http from "node:http";
import type { Socket } from "node:net";

/** Http1Connections close HTTP/1.1 connections gracefully: at an age, and when the server drains. */
export interface Http1Connections {
  /** Tracks one accepted HTTP/1.1 connection until it closes; it is closed after about maxAgeMs. */
  add(socket: Socket): void;
  /**
   * Notes a request on a tracked connection. On a connection being closed, the response says
   * `Connection: close`, and the connection ends once its last response has been written.
   */
  request(req: http.IncomingMessage, res: http.ServerResponse): void;
  /** Closes every connection: idle ones at once, busy ones after their responses in progress. */
  closeAll(): void;
}

interface Tracked {
  /** Responses not yet finished. */
  readonly responses: Set<http.ServerResponse>;
  closing: boolean;
  aged: NodeJS.Timeout | undefined;
}

/**
 * createHttp1Connections closes each HTTP/1.1 connection after about maxAgeMs (±10 % jitter, as
 * HTTP/2 connections get their GOAWAY; 0: never), and every one on closeAll. HTTP/1.1 has no
 * GOAWAY, so a connection is closed without cutting a response short: with no request in
 * progress it is ended at once (a keep-alive client opens a new one for its next request);
 * otherwise its responses say `Connection: close` and it ends after the last of them. No timer
 * keeps the process alive.
 */
export function createHttp1Connections(maxAgeMs: number): Http1Connections {
  const tracked = new Map<Socket, Tracked>();
  const close = (socket: Socket, state: Tracked) => {
    state.closing = true;
    // Ending an idle connection loses nothing; a client that never closes its side is cut off.
    if (state.responses.size === 0) socket.destroy();
    // Node ends the connection after a response that says so.
    for (const res of state.responses) if (!res.headersSent) res.setHeader("Connection", "close");
  };
  return {
    add(socket) {
      const state: Tracked = { responses: new Set(), closing: false, aged: undefined };
      if (maxAgeMs > 0) {
        state.aged = setTimeout(
          () => close(socket, state),
          maxAgeMs * (0.9 + Math.random() * 0.2),
        ).unref();
      }
      tracked.set(socket, state);
      socket.once("close", () => {
        clearTimeout(state.aged);
        tracked.delete(socket);
      });
    },
    request(req, res) {
      const socket = req.socket;
      const state = tracked.get(socket);
      if (state === undefined) return;
      state.responses.add(res);
      if (state.closing) res.setHeader("Connection", "close");
      res.once("close", () => {
        state.responses.delete(res);
        // A response whose headers had gone out without the close still ends the connection.
        if (state.closing && state.responses.size === 0 && !socket.destroyed) {
          socket.end(() => socket.destroy());
        }
      });
    },
    closeAll() {
      for (const [socket, state] of tracked) close(socket, state);
    },
  };
}
