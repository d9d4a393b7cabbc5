import type * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Sessions is what the gRPC transport needs of its HTTP/2 connections: where they lead, a new
 * stream for each call, and word of each response byte read (which keeps a connection's
 * keepalive quiet while data flows). connect-node's Http2SessionManager is one connection;
 * createSessionPool spreads calls over several.
 */
export interface Sessions {
  /** The origin every connection leads to, e.g. `http://127.0.0.1:50051`. */
  readonly authority: string;
  /** Opens a stream for one call on one of the connections, connecting it first if needed. */
  request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream>;
  /** Tells the connection a stream came from that some of its response was read. */
  notifyResponseByteRead(stream: http2.ClientHttp2Stream): void;
}

/**
 * createSessionPool returns Sessions that start each call on the connection of `connections`
 * with the fewest calls open (the earliest on a tie), so concurrent calls spread over all of
 * them: a server running several workers (`spillway serve --workers`) hands each connection to
 * one worker, and a client holding one connection reaches one worker only.
 *
 * Guarantees: every connection leads to the same authority (otherwise the pool is refused with
 * INVALID_ARGUMENT); a call's stream counts against its connection from the moment it is asked
 * for until the stream closes, and a request that fails counts no longer; notifyResponseByteRead
 * reaches the connection the stream came from.
 */
export function createSessionPool(connections: readonly Sessions[]): Sessions {
  const [first] = connections;
  if (first === undefined) {
    throw new ConnectError("a session pool needs at least one connection", Code.InvalidArgument);
  }
  if (connections.some((c) => c.authority !== first.authority)) {
    throw new ConnectError(
      "every connection of a session pool must lead to the same server",
      Code.InvalidArgument,
    );
  }
  if (connections.length === 1) return first;
  const open = connections.map(() => 0);
  const origin = new WeakMap<http2.ClientHttp2Stream, Sessions>();
  return {
    authority: first.authority,
    async request(method, path, headers, options) {
      let at = 0;
      for (let i = 1; i < open.length; i++) {
        if ((open[i] as number) < (open[at] as number)) at = i;
      }
      const connection = connections[at] as Sessions;
      open[at] = (open[at] as number) + 1;
      let stream: http2.ClientHttp2Stream;
      try {
        stream = await connection.request(method, path, headers, options);
      } catch (err) {
        open[at] = (open[at] as number) - 1;
        throw err;
      }
      origin.set(stream, connection);
      stream.once("close", () => {
        open[at] = (open[at] as number) - 1;
      });
      return stream;
    },
    notifyResponseByteRead(stream) {
      origin.get(stream)?.notifyResponseByteRead(stream);
    },
  };
}
