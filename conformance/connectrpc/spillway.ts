/**
 * The parts of Spillway under test, in one place: the server's handler stack and the SDK's
 * transports (gRPC over HTTP/2, gRPC-Web over HTTP/1.1). Every other file here imports Spillway only through this one.
 */

export {
  type ClientTlsOptions,
  createGrpcTransport,
  createGrpcWebTransport,
  createKeepAliveAgent,
  createWideWindowSessionManager,
} from "@spillway/client";
export { createChunkPool } from "../../server/src/backends/chunk-pool.js";
export { createRequestIdleLimit } from "../../server/src/idle-request.js";
export { defaultLimits } from "../../server/src/limits.js";
export { createPlaintextListener } from "../../server/src/plaintext-listener.js";
export { createRequestDeadlines } from "../../server/src/request-deadline.js";
export { createSpillwayHandler, serverHttp2Settings } from "../../server/src/server.js";
export { wireDataFrame } from "../../server/src/window/data-frame-wire.js";
