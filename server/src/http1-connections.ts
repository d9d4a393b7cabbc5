import type * as http from "node:http";
import type { Socket } from "node:net";
import { connectionAgeMs } from "./connection-age.js";
import { feedInPieces } from "./http1-pieces.js";

/**
 * Http1Connections serve each HTTP/1.1 connection's requests one at a time, and close the
 * connections gracefully: at an age, and when the server drains.
 */
export interface Http1Connections {
  /**
   * Tracks one accepted HTTP/1.1 connection until it closes; it is closed after about maxAgeMs.
   * Node's HTTP server must already have the socket: its bytes are fed to Node's parser in
   * pieces from here on (feedInPieces).
   */
  add(socket: Socket): void;
  /**
   * Serves a request on a tracked connection in its turn: `serve` runs at once when no other
   * request of the connection is in progress, else once every response before this one has
   * ended, and never if the connection closes first. A request that would be the
   * MAX_PIPELINED_REQUESTS + 1st waiting destroys its connection instead. On a connection being closed, the response
   * says `Connection: close`, and the connection ends once that response has been written.
   */
  request(req: http.IncomingMessage, res: http.ServerResponse, serve: () => void): void;
  /** Closes every connection: idle ones at once, busy ones after their response in progress. */
  closeAll(): void;
}

/**
 * The most requests one HTTP/1.1 connection may pipeline behind the one in progress; a connection
 * that sends more is closed. Browsers and Connect/gRPC-Web clients never pipeline; a pipelining
 * client that keeps its burst under this is served in full.
 */
export const MAX_PIPELINED_REQUESTS = 64;

interface Waiting {
  readonly res: http.ServerResponse;
  readonly serve: () => void;
}

interface Tracked {
  /** The response being answered, until it has ended. */
  current: http.ServerResponse | undefined;
  /** Requests pipelined behind it, in the order they came. */
  readonly waiting: Waiting[];
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
 * response before it has ended (its `close`), and at most MAX_PIPELINED_REQUESTS wait: a
 * connection that pipelines more is destroyed, which frees every request it holds. The
 * connection keeps being read while requests wait: one that is not read sees no FIN, so a client
 * that went away would leave what it had sent parsed and held (a 64 KiB read holds about 2,500
 * requests) for as long as its first response lasted, a never-ending Watch for instance.
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
      if (next !== undefined) start(socket, state, next);
    });
    serve();
  };
  return {
    add(socket) {
      const state: Tracked = {
        current: undefined,
        waiting: [],
        closing: false,
        aged: undefined,
      };
      if (maxAgeMs > 0) {
        state.aged = setTimeout(() => close(socket, state), connectionAgeMs(maxAgeMs)).unref();
      }
      tracked.set(socket, state);
      // A client that shuts its side after its requests (`nc -N`, some proxies) still reads
      // the answers: its FIN must not end ours (the listeners' sockets are not half-open).
      socket.allowHalfOpen = true;
      feedInPieces(socket);
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
        if (state.waiting.length >= MAX_PIPELINED_REQUESTS) {
          state.waiting.length = 0;
          socket.destroy();
          return;
        }
        state.waiting.push({ res, serve });
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
