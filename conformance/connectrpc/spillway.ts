/**
 * The parts of Spillway under test, in one place: the server's handler stack and the SDK's
 * gRPC transport. Every other file here imports Spillway only through this one.
 */

export { createGrpcTransport } from "../../clients/ts/src/grpc-transport.js";
export { createWideWindowSessionManager } from "../../clients/ts/src/session-manager.js";
export { createChunkPool } from "../../server/backends/chunk-pool.js";
export { createRequestIdleLimit } from "../../server/idle-request.js";
export { defaultLimits } from "../../server/limits.js";
export { createRequestDeadlines } from "../../server/request-deadline.js";
export { createSpillwayHandler, serverHttp2Settings } from "../../server/server.js";
export { wireDataFrame } from "../../server/window/data-frame-wire.js";
