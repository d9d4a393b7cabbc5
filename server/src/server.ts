import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo, Server, Socket } from "node:net";
import { isIP } from "node:net";
import { TLSSocket } from "node:tls";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import {
  Code,
  ConnectError,
  createServiceImplSpec,
  type MethodImpl,
  type ServiceImplSpec,
} from "@connectrpc/connect";
import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Health } from "@spillway/proto/grpc/health/v1/health_pb.js";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { isLoopbackHostHeader, isLoopbackName } from "@spillway/wire";
import { type Logger, pino } from "pino";
import { createAuthenticator, createAuthInterceptor } from "./auth.js";
import type { Backend } from "./backends/backend.js";
import { type ChunkPool, createChunkPool } from "./backends/chunk-pool.js";
import { instrumentBackend } from "./backends/instrumented.js";
import { markStoreFaults } from "./backends/mark-store-faults.js";
import { pokeOnStoreFault } from "./backends/poke-on-store-fault.js";
import { allowCallFanOut } from "./call-fan-out.js";
import { capClientDeadline } from "./client-deadline.js";
import { loadTlsCredentials, TLS_FLAG_NAMES, type TlsFileNames } from "./config-files.js";
import { connectionAgeMs } from "./connection-age.js";
import {
  type ConnectionLiveness,
  defaultConnectionLiveness,
  watchConnection,
  watchHttp1Connection,
} from "./connection-liveness.js";
import type { CpuTurns } from "./cpu-turns.js";
import { createGrpcNodeHandler } from "./grpc-node-handler.js";
import { createGrpcWebHandler } from "./grpc-web-handler.js";
import type { GrpcWireOptions } from "./grpc-wire.js";
import { createHealthState, type HealthState } from "./health.js";
import { createHttp1Connections } from "./http1-connections.js";
import { createRequestIdleLimit } from "./idle-request.js";
import { createInflightBytesLimit } from "./inflight-bytes-limit.js";
import { loadInspectorAssets } from "./inspector-assets.js";
import { callWeights, defaultLimits, type ServerLimits } from "./limits.js";
import { createLogInterceptor } from "./log-interceptor.js";
import type { Metrics } from "./metrics.js";
import { peerKey, peerOf } from "./peer-key.js";
import { allowHalfOpenClients, createPlaintextListener } from "./plaintext-listener.js";
import { createReflectionServices } from "./reflection.js";
import { checkCapsFitReplies } from "./reply-size.js";
import { createRequestArrivalBound } from "./request-arrival.js";
import { createRequestDeadlines, type RequestDeadlines } from "./request-deadline.js";
import { watchResponseStall } from "./response-stall.js";
import {
  type CallLimits,
  createSpillwayCore,
  createSpillwayService,
  SPILLWAY_VERSION,
  type SpillwayCore,
} from "./service.js";
import { createStoreReadiness, probeStore } from "./store-readiness.js";
import { createTenantCallLimit } from "./tenant-call-limit.js";
import { createTraceInterceptor } from "./trace-interceptor.js";
import { createWindowCaps, type WindowCaps } from "./window/caps.js";
import { wireDataFrame } from "./window/data-frame-wire.js";

/** SpillwayServerOptions configure one Spillway server process. */
export interface SpillwayServerOptions {
  readonly backend: Backend;
  /** Address to bind; default 127.0.0.1. Without a token file only loopback is allowed. */
  readonly host?: string;
  /** Port to bind; 0 picks a free port. Default 50051. */
  readonly port?: number;
  /** Operator token file (`<sha256 hex> <tenant>` lines). Unset: dev mode, one tenant. */
  readonly tokenFile?: string | undefined;
  /** PEM certificate and key; set both to serve TLS instead of h2c. */
  readonly tls?:
    | {
        readonly certFile: string;
        readonly keyFile: string;
        /**
         * PEM CA bundle; when set, clients must present a certificate it signed (mTLS). The
         * tenant still comes from the bearer token.
         */
        readonly clientCaFile?: string | undefined;
      }
    | undefined;
  /**
   * How errors name the setting each file came from (the token file, the TLS files); the
   * flags (`--token-file`, `--tls-cert`, ...) by default. The CLI adds the environment
   * variable when the path came from there.
   */
  readonly fileNames?: { readonly tokenFile?: string } & Partial<TlsFileNames>;
  readonly limits?: Partial<ServerLimits>;
  readonly caps?: Partial<WindowCaps>;
  /** Clock, for tests of expiry. */
  readonly now?: () => number;
  /** How long computations share the event loop by tenant; the process's turns unless given. */
  readonly turns?: CpuTurns;
  /**
   * Close each connection gracefully (GOAWAY; in-flight streams finish) after about this long,
   * ±10 % jitter, so long-lived HTTP/2 connections rebalance across replicas; an HTTP/1.1
   * connection is closed then if idle, else after its responses in progress (`Connection:
   * close`). Default 30 min; 0 keeps connections open indefinitely.
   */
  readonly maxConnectionAgeMs?: number;
  /**
   * Close a connection gracefully (GOAWAY) once it has had no open stream this long; an
   * HTTP/1.1 one once it has had no request in progress, or no byte moving, this long. Default
   * 5 min; 0 keeps idle connections open.
   */
  readonly connectionIdleMs?: number;
  /**
   * Send each connection an HTTP/2 PING this often, and destroy it when the peer does not
   * answer within keepaliveTimeoutMs, so dead peers release their calls. Default 60 s; 0: off.
   */
  readonly keepaliveMs?: number;
  /** How long a peer has to answer a keepalive PING; default 20 s. */
  readonly keepaliveTimeoutMs?: number;
  /** Calls one tenant may have in flight at once on this server; default 256. */
  readonly maxCallsPerTenant?: number;
  /**
   * The most health Watch streams the process keeps open, shared fairly among peers
   * (createHealthState); default DEFAULT_MAX_HEALTH_WATCHES.
   */
  readonly maxHealthWatches?: number;
  /**
   * Longest a call may run, from its arrival to the end of its response, before it ends with
   * DEADLINE_EXCEEDED; unset or 0: only the client's deadline and the Offload idle timeout apply.
   */
  readonly requestDeadlineMs?: number;
  /**
   * Bytes this server may hold for Offload and ReadToolOutput calls in flight (each reserves
   * one chunk plus the inline limit, or one 1 MiB read frame); a call past it is refused with
   * RESOURCE_EXHAUSTED. Default 1 GiB; 0 turns the limit off.
   */
  readonly maxInflightBytes?: number;
  /**
   * How often the store is probed (a one-key list, or the backend's own probe) for readiness:
   * while a probe fails, health answers NOT_SERVING for every service, and SERVING again once
   * one succeeds. A backend call failing as if the store were down probes at once (at most one
   * probe a second). Default 5000; 0 turns readiness off (health then only reports a drain).
   */
  readonly storeProbeIntervalMs?: number;
  /**
   * Bytes the calls in flight of one tenant may hold together, so that one tenant cannot hold
   * what the others need (docs/design/admission-fairness.md). Default: with a token file a
   * quarter of maxInflightBytes (at least one call's weight), in dev mode (one tenant) all of
   * it; 0 turns the limit off. A tenant's `max_inflight_bytes` in the token file lowers it.
   */
  readonly maxInflightBytesPerTenant?: number;
  /**
   * Structured logger: successful calls at debug, client-caused failures at info or warn,
   * server faults at error (log-interceptor.ts). Default: silent.
   */
  readonly logger?: Logger;
  /** Prometheus metrics: every call and every backend failure is recorded when set. */
  readonly metrics?: Metrics;
  /**
   * Where gRPC request messages are assembled and, once Offload is done with a chunk, reused;
   * default: a pool of 1 MiB chunks (the SDK's chunk size and its framing), 8 kept free,
   * lending none for messages under 64 KiB.
   */
  readonly requestChunks?: ChunkPool;
  /**
   * Serve the browser inspector (the @spillway/inspector package's files) at `/inspector/`
   * on this server's port, TLS or not (docs/inspector.md). The files are public; every call the
   * page makes is authenticated like any other. Off by default: those paths are then 404.
   */
  readonly inspector?: boolean;
}

/** SpillwayServer is a running server. */
export interface SpillwayServer {
  /** Base URL clients use, e.g. `http://127.0.0.1:50051`. */
  readonly url: string;
  readonly port: number;
  readonly core: SpillwayCore;
  readonly health: HealthState;
  /**
   * Re-reads the token file (SIGHUP) and returns how many tokens it holds, or undefined in dev
   * mode (no token file); a broken file throws an Error naming its path and keeps the tokens in
   * force. A file with no token is taken (it revokes every token) with a warning in the log.
   */
  reloadTokens(): number | undefined;
  /**
   * Re-reads the TLS certificate, key and client CA bundle (SIGHUP) and serves new connections
   * with them; connections already open keep theirs. Returns false when the server serves
   * h2c. A file that is missing, garbled, or a key that does not match the certificate throws
   * an Error naming the setting and the path, and the credentials in force stay.
   */
  reloadTls(): boolean;
  /**
   * Drains and stops. Health turns NOT_SERVING at once, but for drainDelayMs (default 0) every
   * call is still served and new connections accepted, so load balancers polling health see
   * NOT_SERVING and move traffic away before anything is refused. Then the listener closes,
   * every connection gets GOAWAY, calls arriving after that get UNAVAILABLE, and in-flight
   * calls get graceMs (default 10000) to finish before connections are destroyed; finally the
   * backend is released. Later calls return the same promise; one with drainDelayMs 0 ends
   * the delay under way at once.
   */
  close(graceMs?: number, drainDelayMs?: number): Promise<void>;
}

/** A 1 MiB offload chunk as its request message: the bytes and their field's tag and length. */
const requestChunkBytes = 1024 * 1024 + 16;
/** Request messages below this are assembled in buffers of their own, not pooled chunks. */
const smallestPooledRequestBytes = 64 * 1024;
/** HTTP/2 flow-control window: large enough that one stream can fill a fast link. */
const FLOW_CONTROL_WINDOW = 32 * 1024 * 1024;
/** Largest HTTP/2 DATA frame the server accepts: a 1 MiB offload chunk in a few frames, not 64. */
const MAX_FRAME_SIZE = 1024 * 1024;

/**
 * The default per-tenant share of the in-flight bytes: all of them for dev mode's one tenant;
 * with a token file a quarter, so at least four tenants must each hold all they may before the
 * server is full, but never less than the heaviest call, so every tenant can make every call.
 */
function defaultTenantShare(
  maxInflightBytes: number,
  tenants: boolean,
  weights: { offload: number; read: number },
): number {
  if (!tenants || maxInflightBytes === 0) return maxInflightBytes;
  return Math.min(
    maxInflightBytes,
    Math.max(Math.floor(maxInflightBytes / 4), weights.offload, weights.read),
  );
}

/** isLoopback tells whether a bind address only accepts local connections (isLoopbackName). */
export function isLoopback(host: string): boolean {
  return isLoopbackName(host);
}

/**
 * refuseForeignHost answers a dev-mode HTTP/1.1 request addressed to another name with 403 and
 * closes the connection. Without a token file every caller is the tenant `dev`, and HTTP/1.1 is
 * what a browser speaks: a page whose name was re-pointed at 127.0.0.1 (DNS rebinding) would be
 * same-origin with the server. Its requests carry that name in `Host`; real clients send the
 * loopback address or name they connected to.
 */
function refuseForeignHost(res: http.ServerResponse): void {
  const body =
    "spillway: a server without a token file answers HTTP/1.1 only to requests addressed to a loopback name (Host: 127.0.0.1, localhost or [::1])\n";
  res.writeHead(403, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    connection: "close",
  });
  res.end(body);
}

/**
 * What one HTTP/2 session may hold in memory, in megabytes (Node's unit). Node's default of 10
 * is below the 32 MiB a client may have in flight under the flow-control window above, and past
 * it Node refuses every new stream on the connection with ENHANCE_YOUR_CALM: a client whose
 * refused offloads were still arriving saw a call reset that way.
 */
const maxSessionMemoryMb = 2 * (FLOW_CONTROL_WINDOW / (1024 * 1024)) + 16;

/** The bytes a server holds for calls in flight when `maxInflightBytes` is not given: 1 GiB. */
export const DEFAULT_MAX_INFLIGHT_BYTES = 1024 ** 3;

/** The HTTP/2 settings Spillway's server sends its clients. */
export const serverHttp2Settings: http2.Settings = {
  initialWindowSize: FLOW_CONTROL_WINDOW,
  maxConcurrentStreams: 1000,
  maxFrameSize: MAX_FRAME_SIZE,
};

/** SpillwayHandlerParts are what createSpillwayHandler serves and how. */
export interface SpillwayHandlerParts {
  /** The options every protocol handler takes: interceptors, message limits, compression. */
  readonly handlerOptions: Partial<UniversalHandlerOptions>;
  /** The services served, over every protocol. */
  readonly services: readonly ServiceImplSpec[];
  /** How the direct gRPC path moves message bytes to and from the wire. */
  readonly wire: GrpcWireOptions;
  /** Longest a request may take to arrive, or a response wait for its reader. */
  readonly idleStreamMs: number;
  /** The server's request deadlines (createRequestDeadlines). */
  readonly deadlines: RequestDeadlines;
}

/**
 * createSpillwayHandler returns the request handler Spillway's HTTP/2 server runs. The calls
 * gRPC clients make (binary, uncompressed, over HTTP/2) are served straight from Node's stream,
 * bytes-mode data frames written uncopied (grpc-node-handler.ts, docs/design/grpc-fast-path.md);
 * everything else (gRPC over HTTP/1.1, gRPC-Web, Connect, JSON or compressed gRPC) takes
 * connect-node's adapter and connect's own handlers, with unary requests bounded in how long
 * they take to arrive and responses in how long they wait for their reader. The same stack
 * serves Spillway and connectrpc's conformance service.
 */
export function createSpillwayHandler(
  parts: SpillwayHandlerParts,
): (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void {
  const { handlerOptions, services, wire, idleStreamMs, deadlines } = parts;
  const contextValues = (req: http.IncomingMessage | http2.Http2ServerRequest) =>
    deadlines.contextValues(req).set(peerKey, peerOf(req.socket?.remoteAddress));
  const grpcNodeHandler = createGrpcNodeHandler(handlerOptions, {
    services,
    wire,
    contextValues,
    idleStreamMs,
  });
  const grpcWebHandler = createGrpcWebHandler(handlerOptions, {
    services,
    wire,
    contextValues,
  });
  const connectHandler = connectNodeAdapter({
    ...handlerOptions,
    routes: (router: ConnectRouter) => {
      for (const spec of services) {
        for (const { method, impl } of Object.values(spec.methods)) {
          router.rpc(method, impl as MethodImpl<typeof method>);
        }
      }
    },
    contextValues,
  });
  const boundArrival = createRequestArrivalBound(
    services.map((spec) => spec.service),
    idleStreamMs,
  );
  return deadlines.wrap(
    (
      req: http.IncomingMessage | http2.Http2ServerRequest,
      res: http.ServerResponse | http2.Http2ServerResponse,
    ) => {
      capClientDeadline(req.headers);
      if (req instanceof http2.Http2ServerRequest && res instanceof http2.Http2ServerResponse) {
        if (grpcNodeHandler(req, res)) return;
      }
      boundArrival(req, res);
      watchResponseStall(req, res, idleStreamMs);
      if (req instanceof http.IncomingMessage && res instanceof http.ServerResponse) {
        if (grpcWebHandler(req, res)) return;
      }
      connectHandler(req, res);
    },
  );
}

/**
 * startSpillwayServer serves SpillwayService, grpc.health.v1 and gRPC server reflection (v1 and
 * v1alpha, authenticated like every call but health's) for gRPC, gRPC-Web and Connect
 * clients on one port, plaintext or TLS when configured, over HTTP/2 and HTTP/1.1 alike: TLS
 * negotiates the version through ALPN; plaintext connections starting with the HTTP/2 preface are
 * h2c, any other is HTTP/1.1 (preface-router.ts), served by the same handler and bounded as
 * docs/operations.md#http11 says.
 *
 * Responses are not compressed: payloads are streamed at wire speed and compressing them
 * costs more CPU than it saves on the links Spillway runs on. HTTP/2 flow-control windows
 * are raised so a single large read or offload is not throttled by the 64 KiB default.
 */
export async function startSpillwayServer(opts: SpillwayServerOptions): Promise<SpillwayServer> {
  const host = opts.host ?? "127.0.0.1";
  if (opts.tokenFile === undefined && !isLoopback(host)) {
    throw new Error(
      `refusing to listen on ${host} without a token file: dev mode serves loopback only`,
    );
  }
  const limits: ServerLimits = { ...defaultLimits, ...opts.limits };
  const caps: WindowCaps = createWindowCaps(opts.caps);
  checkCapsFitReplies(caps);
  const logger = opts.logger ?? pino({ level: "silent" });
  const health = createHealthState([SpillwayService.typeName], {
    maxWatches: opts.maxHealthWatches,
  });
  const storeProbeIntervalMs = opts.storeProbeIntervalMs ?? 5_000;
  const readiness =
    storeProbeIntervalMs > 0
      ? createStoreReadiness({
          probe: (callOpts) => probeStore(opts.backend, callOpts),
          intervalMs: storeProbeIntervalMs,
          onChange: (usable, err) => {
            health.setUnready("store", !usable);
            if (usable) logger.info("store usable again: health SERVING");
            else logger.warn({ err }, "store unusable: health NOT_SERVING");
          },
        })
      : undefined;
  // Store refusals are marked as the server's fault before anything logs or counts them.
  const marked = markStoreFaults(opts.backend);
  const instrumented =
    opts.metrics === undefined ? marked : instrumentBackend(marked, opts.metrics);
  const core = createSpillwayCore({
    backend:
      readiness === undefined
        ? instrumented
        : pokeOnStoreFault(instrumented, () => readiness.poke()),
    limits,
    caps,
    ...(opts.now === undefined ? {} : { now: opts.now }),
    ...(opts.turns === undefined ? {} : { turns: opts.turns }),
  });

  let draining = false;
  const drainGate: Interceptor = (next) => async (req) => {
    if (draining && req.service.typeName !== Health.typeName) {
      throw new ConnectError("server is draining; retry on another replica", Code.Unavailable);
    }
    return next(req);
  };

  const maxInflightBytes = opts.maxInflightBytes ?? DEFAULT_MAX_INFLIGHT_BYTES;
  const weights = callWeights(limits);
  const auth = createAuthenticator({
    tokenFile: opts.tokenFile,
    minInflightBytes: Math.max(weights.offload, weights.read),
    name: opts.fileNames?.tokenFile ?? "--token-file",
  });
  // A file with no token refuses every call; that is rarely meant, but a server may start
  // before its tenants are added (then SIGHUP), so it is said rather than refused.
  const warnIfNoTokens = (count: number): void => {
    if (auth.enforcing && count === 0) {
      logger.warn(
        { tokenFile: opts.tokenFile },
        "the token file holds no token: every call is refused UNAUTHENTICATED until tokens are added and SIGHUP reloads it",
      );
    }
  };
  warnIfNoTokens(auth.count());
  const liveness: ConnectionLiveness = {
    idleMs: opts.connectionIdleMs ?? defaultConnectionLiveness.idleMs,
    keepaliveMs: opts.keepaliveMs ?? defaultConnectionLiveness.keepaliveMs,
    keepaliveTimeoutMs: opts.keepaliveTimeoutMs ?? defaultConnectionLiveness.keepaliveTimeoutMs,
  };
  const callLimits: CallLimits = {
    maxInflightBytes,
    maxInflightBytesPerTenant:
      opts.maxInflightBytesPerTenant ??
      defaultTenantShare(maxInflightBytes, opts.tokenFile !== undefined, weights),
    maxCallsPerTenant: opts.maxCallsPerTenant ?? 256,
    requestDeadlineMs: opts.requestDeadlineMs,
    connection: liveness,
  };
  const deadlines = createRequestDeadlines(callLimits.requestDeadlineMs);
  const handlerOptions = {
    interceptors: [
      ...(opts.metrics === undefined ? [] : [opts.metrics.interceptor]),
      // Before the log interceptor, so its lines carry the call's trace id.
      createTraceInterceptor(SPILLWAY_VERSION),
      createLogInterceptor(logger),
      drainGate,
      deadlines.interceptor,
      createAuthInterceptor(auth),
      createTenantCallLimit(callLimits.maxCallsPerTenant),
      createInflightBytesLimit(
        {
          maxBytes: callLimits.maxInflightBytes,
          maxBytesPerTenant: callLimits.maxInflightBytesPerTenant,
        },
        weights,
      ),
      // Last: only admitted calls start a timer; a refused one never reads its request.
      createRequestIdleLimit(limits.idleStreamMs),
    ],
    acceptCompression: [],
    // A chunk plus the header and framing; larger messages are refused before they are read.
    readMaxBytes: limits.maxChunkBytes + 64 * 1024,
  };
  const spillwayImpl = allowCallFanOut(createSpillwayService(core, callLimits, logger));
  const spillway = createServiceImplSpec<typeof SpillwayService>(SpillwayService, spillwayImpl);
  const wire = {
    framer: wireDataFrame,
    recycle: (part: Uint8Array) => core.backend.release?.(part),
    requestChunks:
      opts.requestChunks ?? createChunkPool(requestChunkBytes, 8, smallestPooledRequestBytes),
  };
  // Read before listening: a server asked for the inspector without its files does not start.
  const inspector = opts.inspector === true ? loadInspectorAssets() : undefined;
  const spillwayHandler = createSpillwayHandler({
    handlerOptions,
    services: [
      spillway,
      createServiceImplSpec<typeof Health>(Health, health.service),
      // Reflection is an RPC like any other: it needs a token where the server has a token file.
      ...createReflectionServices([SpillwayService, Health]),
    ],
    wire,
    idleStreamMs: limits.idleStreamMs,
    deadlines,
  });
  const handler: typeof spillwayHandler =
    inspector === undefined
      ? spillwayHandler
      : (req, res) => {
          if (!inspector.handle(req, res)) spillwayHandler(req, res);
        };

  const settings = serverHttp2Settings;
  const tlsNames: TlsFileNames = { ...TLS_FLAG_NAMES, ...opts.fileNames };
  const tlsFiles = opts.tls;
  const maxAgeMs = opts.maxConnectionAgeMs ?? 30 * 60 * 1000;
  const http1Connections = createHttp1Connections(maxAgeMs);
  const devMode = opts.tokenFile === undefined;
  const servedHandler = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => {
    if (req instanceof http.IncomingMessage && res instanceof http.ServerResponse) {
      openHttp1Requests++;
      res.once("close", () => {
        openHttp1Requests--;
        // A write waiting for 'drain' when the client went away waits for ever: Node emits
        // neither 'drain' nor 'error' on a response whose socket closed, so connect-node's
        // write never settled and the call kept its tenant's slot until the process ended.
        if (!res.writableFinished && res.listenerCount("error") > 0) {
          res.emit("error", new ConnectError("the client went away", Code.Canceled));
        }
      });
      // Pipelined requests are served one at a time, each in its turn.
      http1Connections.request(req, res, () => {
        if (devMode && !isLoopbackHostHeader(req.headers.host)) refuseForeignHost(res);
        else handler(req, res);
      });
      return;
    }
    handler(req, res);
  };
  const server =
    tlsFiles === undefined
      ? http2.createServer({ settings, maxSessionMemory: maxSessionMemoryMb }, servedHandler)
      : http2.createSecureServer(
          {
            settings,
            maxSessionMemory: maxSessionMemoryMb,
            ...loadTlsCredentials(tlsFiles, tlsNames),
            allowHTTP1: true,
            ...(tlsFiles.clientCaFile === undefined
              ? {}
              : { requestCert: true, rejectUnauthorized: true }),
          },
          servedHandler,
        );
  const sessions = new Set<http2.ServerHttp2Session>();
  /** HTTP/2 streams open, and HTTP/1.1 requests not yet answered. */
  let openStreams = 0;
  let openHttp1Requests = 0;
  // Sockets are tracked too: a session whose peer went quiet may never report its close.
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  let listener: Server;
  let closeHttp1: (() => void) | undefined;
  if (opts.tls === undefined) {
    ({ listener, closeHttp1 } = createPlaintextListener({
      http2Server: server,
      handler: servedHandler,
      idleMs: liveness.idleMs,
      onConnection: track,
      onHttp1: (socket) => http1Connections.add(socket),
    }));
  } else {
    listener = server;
    // TLS clients that did not negotiate HTTP/2 are served by Node's HTTP/1.1 code on this server.
    allowHalfOpenClients(server);
    server.on("secureConnection", (socket: Socket) => {
      track(socket);
      if (socket instanceof TLSSocket && socket.alpnProtocol !== "h2") {
        http1Connections.add(socket);
        watchHttp1Connection(socket, liveness);
      }
    });
  }
  server.on("session", (session) => {
    sessions.add(session);
    // Counted so that a drain whose grace runs out can say how many calls it cut off.
    session.on("stream", (stream: http2.ServerHttp2Stream) => {
      openStreams++;
      stream.once("close", () => openStreams--);
    });
    watchConnection(session, liveness);
    const aged =
      maxAgeMs > 0
        ? setTimeout(() => session.close(), connectionAgeMs(maxAgeMs)).unref()
        : undefined;
    session.once("close", () => {
      sessions.delete(session);
      clearTimeout(aged);
    });
    session.once("connect", () => session.setLocalWindowSize(FLOW_CONTROL_WINDOW));
    // A session that is already connected gets the larger window at once.
    if (!session.connecting) session.setLocalWindowSize(FLOW_CONTROL_WINDOW);
  });

  // Health is right from the first poll: a store that is down at start is NOT_SERVING.
  await readiness?.check();
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(opts.port ?? 50051, host, () => {
      listener.off("error", reject);
      resolve();
    });
  });
  const port = (listener.address() as AddressInfo).port;
  const scheme = opts.tls === undefined ? "http" : "https";
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;
  readiness?.start();

  let closing: Promise<void> | undefined;
  let endDelay: (() => void) | undefined;
  return {
    url: `${scheme}://${urlHost}:${port}`,
    port,
    core,
    health,
    reloadTokens() {
      if (!auth.enforcing) return undefined;
      const count = auth.reload();
      warnIfNoTokens(count);
      return count;
    },
    reloadTls() {
      if (tlsFiles === undefined) return false;
      // Read and checked in full first: a bad file throws here and changes nothing.
      const credentials = loadTlsCredentials(tlsFiles, tlsNames);
      (server as http2.Http2SecureServer).setSecureContext(credentials);
      return true;
    },
    close(graceMs = 10_000, drainDelayMs = 0) {
      // A later close without a delay ends the one under way (SIGINT after SIGTERM).
      if (closing !== undefined && drainDelayMs === 0) endDelay?.();
      closing ??= (async () => {
        readiness?.stop();
        health.setUnready("draining", true);
        // Load balancers poll health every few seconds and keep sending calls until they see
        // NOT_SERVING; refusing those calls, or connections, before then would fail them.
        if (drainDelayMs > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, drainDelayMs);
            endDelay = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        health.endWatches();
        draining = true;
        const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
        for (const session of sessions) session.close();
        http1Connections.closeAll();
        closeHttp1?.();
        const timer = setTimeout(() => {
          if (openStreams + openHttp1Requests > 0) {
            // Each call cut off here is logged as its client's cancel, which is all its
            // handler sees: this line is what tells the operator the grace was too short.
            logger.error(
              { graceMs, http2Streams: openStreams, http1Requests: openHttp1Requests },
              "the drain's grace ran out: calls still in flight were cut off",
            );
          }
          for (const session of sessions) session.destroy();
          for (const socket of sockets) socket.destroy();
        }, graceMs);
        await closed;
        clearTimeout(timer);
        await opts.backend.close();
      })();
      return closing;
    },
  };
}
