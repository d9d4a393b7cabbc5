import type * as http from "node:http";
import type { Socket } from "node:net";

/**
 * Http1Connections serve each HTTP/1.1 connection's requests one at a time, and close the
 * connections gracefully: at an age, and when the server drains.
 */
export interface Http1Connections {
  /** Tracks one accepted HTTP/1.1 connection until it closes; it is closed after about maxAgeMs. */
  add(socket: Socket): void;
  /**
   * Serves a request on a tracked connection in its turn: `serve` runs at once when no other
   * request of the connection is in progress, else once every response before this one has
   * ended, and never if the connection closes first. On a connection being closed, the response
   * says `Connection: close`, and the connection ends once that response has been written.
   */
  request(req: http.IncomingMessage, res: http.ServerResponse, serve: () => void): void;
  /** Closes every connection: idle ones at once, busy ones after their response in progress. */
  closeAll(): void;
}

interface Waiting {
  readonly res: http.ServerResponse;
  readonly serve: () => void;
}

interface Tracked {
  /** The response being answered, until it has ended. */
  current: http.ServerResponse | undefined;
  /** Requests pipelined behind it, in the order they came. */
  readonly waiting: Waiting[];
  /** Whether the connection is kept from being read while requests wait. */
  holding: boolean;
  closing: boolean;
  aged: NodeJS.Timeout | undefined;
}

/**
 * createHttp1Connections serves the requests of each HTTP/1.1 connection one at a time and
 * closes each connection after about maxAgeMs (±10 % jitter, as HTTP/2 connections get their
 * GOAWAY; 0: never), and every one on closeAll.
 *
 * Node's HTTP server hands a handler every pipelined request as soon as it has parsed it, and
 * only queues the responses; served that way, one connection's pipelined burst runs as many
 * calls at once as it holds, taking a tenant's whole call budget. Here a request waits until the
 * response before it has ended (its `close`), and while any request waits the connection is not
 * read, so what a connection holds in memory is its request in progress and those parsed from
 * one read of the socket (at most 64 KiB of requests) with it.
 *
 * HTTP/1.1 has no GOAWAY, so a connection is closed without cutting a response short: with no
 * request in progress it is ended at once (a keep-alive client opens a new one for its next
 * request); otherwise its response in progress says `Connection: close` and it ends after that.
 * Requests pipelined behind it are not served: a pipelining client retries what a closed
 * connection left unanswered (RFC 9112 §9.3.2). No timer keeps the process alive.
 */
export function createHttp1Connections(maxAgeMs: number): Http1Connections {
  const tracked = new Map<Socket, Tracked>();
  const close = (socket: Socket, state: Tracked) => {
    state.closing = true;
    // Ending an idle connection loses nothing; a client that never closes its side is cut off.
    if (state.current === undefined) socket.destroy();
    // Node ends the connection after a response that says so.
    else if (!state.current.headersSent) state.current.setHeader("Connection", "close");
  };
  const start = (socket: Socket, state: Tracked, { res, serve }: Waiting) => {
    state.current = res;
    res.once("close", () => {
      state.current = undefined;
      const next = state.waiting.shift();
      // Node has already ended a connection whose response said `Connection: close`.
      if (socket.destroyed || !socket.writable) return;
      if (state.closing) {
        // A response whose headers had gone out without the close still ends the connection.
        state.waiting.length = 0;
        socket.end(() => socket.destroy());
        return;
      }
      if (next === undefined) return;
      // The last waiting request is served: read the connection again for the next ones.
      if (state.waiting.length === 0) socket.resume();
      start(socket, state, next);
    });
    serve();
  };
  return {
    add(socket) {
      const state: Tracked = {
        current: undefined,
        waiting: [],
        holding: false,
        closing: false,
        aged: undefined,
      };
      if (maxAgeMs > 0) {
        state.aged = setTimeout(
          () => close(socket, state),
          maxAgeMs * (0.9 + Math.random() * 0.2),
        ).unref();
      }
      tracked.set(socket, state);
      socket.once("close", () => {
        clearTimeout(state.aged);
        state.waiting.length = 0;
        tracked.delete(socket);
      });
    },
    request(req, res, serve) {
      const socket = req.socket;
      const state = tracked.get(socket);
      if (state === undefined) {
        serve();
        return;
      }
      if (state.current !== undefined) {
        state.waiting.push({ res, serve });
        // Requests that are not read wait in the kernel and the client, not here.
        socket.pause();
        if (!state.holding) {
          state.holding = true;
          // Node resumes the socket after every request it parses ("to read the next one"),
          // on a 'resume' listener of its own, added before this one: this one runs after it,
          // in the same tick, so no read happens in between.
          socket.on("resume", () => {
            if (state.waiting.length > 0) socket.pause();
          });
        }
        return;
      }
      if (state.closing) res.setHeader("Connection", "close");
      start(socket, state, { res, serve });
    },
    closeAll() {
      for (const [socket, state] of tracked) close(socket, state);
    },
  };
}
