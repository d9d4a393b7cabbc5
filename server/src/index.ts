/**
 * The `spillway` package as a library, for embedding a Spillway server in a Node.js process:
 * the server, the backends it stores on, the window caps and limits it enforces, and its
 * Prometheus metrics. The `spillway` executable is built from the same parts.
 */
// First, before anything loads @bufbuild/protobuf: its JSON encoding of bytes fields picks
// the native base64 encoder only when one exists as it loads (uint8array-to-base64.ts).
import "./install-to-base64.js";

export type {
  Backend,
  BackendCallOptions,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
} from "./backends/backend.js";
export {
  createFilesystemBackend,
  type FilesystemBackend,
  type FilesystemBackendOptions,
} from "./backends/filesystem.js";
export { createMemoryBackend } from "./backends/memory.js";
export { createMinioBackend, type MinioBackendOptions } from "./backends/minio.js";
export { createS3Backend, type S3BackendOptions } from "./backends/s3.js";
export { defaultLimits, type ServerLimits, type TenantLimits } from "./limits.js";
export { createMetrics, type Metrics } from "./metrics.js";
export {
  type MetricsServer,
  type MetricsServerOptions,
  startMetricsServer,
} from "./metrics-server.js";
export {
  isLoopback,
  type SpillwayServer,
  type SpillwayServerOptions,
  startSpillwayServer,
} from "./server.js";
export { defaultWindowCaps, type WindowCaps } from "./window/caps.js";
