import * as http from "node:http";
import type * as http2 from "node:http2";
import { createServer, type Server, type Socket } from "node:net";
import { routePreface } from "./preface-router.js";

/**
 * How long an accepted plaintext connection has to show whether it speaks HTTP/2 or HTTP/1.1,
 * and an HTTP/1.1 request to deliver its headers: real clients send both at once.
 */
const http1HeadersMs = 10_000;
/**
 * How long an HTTP/1.1 request (headers and body) may take to arrive before it is answered 408
 * and its connection closed (Node's default). Large offloads belong on HTTP/2.
 */
const http1RequestMs = 300_000;

/** PlaintextListener is one plaintext port serving HTTP/2 (h2c) and HTTP/1.1. */
export interface PlaintextListener {
  /** The port's listener: listen, close (which waits for every accepted connection) and address. */
  readonly listener: Server;
  /**
   * Stops the HTTP/1.1 server's header and request timeout checks and ends its idle keep-alive
   * connections; the listener is closed on its own.
   */
  closeHttp1(): void;
}

/** PlaintextOptions say where connections go and how long an HTTP/1.1 one may stay idle. */
export interface PlaintextOptions {
  /** The HTTP/2 server connections starting with the HTTP/2 preface are handed to (not listening). */
  readonly http2Server: http2.Http2Server;
  /** The handler HTTP/1.1 requests are served by. */
  readonly handler: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  /**
   * An HTTP/1.1 connection with no request in progress (after Node's 1 s keep-alive margin), or
   * on which no byte moves either way, is closed after this long; 0: never.
   */
  readonly idleMs: number;
  /** Told of every accepted connection. */
  readonly onConnection?: (socket: Socket) => void;
  /**
   * Told of every connection found to speak HTTP/1.1 once Node's HTTP server has it, before its
   * first request is read.
   */
  readonly onHttp1?: (socket: Socket) => void;
}

/**
 * allowHalfOpenClients makes an HTTP/1.1 server answer a client that half-closed its side
 * after sending its request (`nc -N`, `curl --no-buffer` piping, some proxies): Node otherwise
 * ends the connection at the client's FIN, cutting off every response in progress, while the
 * calls behind them may still commit. The connection ends after the last response instead.
 * `httpAllowHalfOpen` is the http.Server property Node's own FIN handling reads.
 */
export function allowHalfOpenClients(server: object): void {
  (server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true;
}

/**
 * createPlaintextListener returns the listener of a plaintext port that speaks both HTTP/2 with
 * prior knowledge (gRPC's h2c) and HTTP/1.1 (Connect and gRPC-Web from browsers and curl), which
 * Node's plaintext HTTP/2 server alone does not: each accepted connection's first bytes decide
 * (routePreface), within http1HeadersMs or it is closed. HTTP/1.1 requests must send their
 * headers within http1HeadersMs of their start (else 408), their whole request within
 * http1RequestMs (else 408), and at most 16 KiB of headers (else 431); Node checks the two
 * timeouts every second.
 */
export function createPlaintextListener(opts: PlaintextOptions): PlaintextListener {
  const http1Server = http.createServer(
    {
      headersTimeout: http1HeadersMs,
      requestTimeout: http1RequestMs,
      // Node checks those two timeouts this often (default 30 s).
      connectionsCheckingInterval: 1_000,
      keepAliveTimeout: opts.idleMs,
    },
    opts.handler,
  );
  http1Server.timeout = opts.idleMs;
  allowHalfOpenClients(http1Server);
  // Node arms the header and request timeouts when a server listens; this one never does.
  http1Server.emit("listening");
  const listener = createServer((socket) => {
    opts.onConnection?.(socket);
    routePreface(socket, http1HeadersMs, {
      http2: (s) => opts.http2Server.emit("connection", s),
      http1: (s) => {
        http1Server.emit("connection", s);
        opts.onHttp1?.(s);
      },
    });
  });
  return {
    listener,
    // http.Server's close clears its timeout checks and ends idle connections, then reports
    // that it never listened, which is expected here.
    closeHttp1: () => http1Server.close(() => undefined),
  };
}
