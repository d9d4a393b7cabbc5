import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import type { Client } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { inject } from "vitest";
import { hashToken } from "../../server/src/auth.js";
import type { Backend } from "../../server/src/backends/backend.js";
import { createFilesystemBackend } from "../../server/src/backends/filesystem.js";
import { createMemoryBackend } from "../../server/src/backends/memory.js";
import { createS3Backend } from "../../server/src/backends/s3.js";
import { type SpillwayServerOptions, startSpillwayServer } from "../../server/src/server.js";
import { createTestS3Client } from "./s3-client.js";

/**
 * TestBackendKind names the backends service tests run on: the embedded ones, and the s3
 * backend against one of the shared object servers (MinIO, SeaweedFS, moto) of the vitest
 * global setup.
 */
export type TestBackendKind = "filesystem" | "memory" | "s3-minio" | "s3-seaweedfs" | "s3-moto";

/** serviceBackends are the backends every service-level suite runs on. */
export const serviceBackends: readonly TestBackendKind[] = ["filesystem", "s3-minio"];

/** TestServer is a real Spillway server on a loopback port with its own data folder. */
export interface TestServer {
  readonly url: string;
  readonly dataDir: string;
  readonly backend: Backend;
  readonly server: Awaited<ReturnType<typeof startSpillwayServer>>;
  /** An SDK client (its own gRPC transport) authenticated with token (or none in dev mode). */
  sdk(token?: string): SpillwayClient;
  /** The generated Connect client over connect-node's gRPC transport, authenticated with token. */
  raw(token?: string): Client<typeof SpillwayService>;
  stop(): Promise<void>;
}

/**
 * startTestServer starts a server on 127.0.0.1:0 over the filesystem (default), memory or
 * s3-on-MinIO backend (a fresh bucket per server). With tokens, it writes a token file mapping each token to its tenant.
 */
export async function startTestServer(
  opts: {
    backend?: TestBackendKind;
    tokens?: Record<string, string>;
    /** Decorates the backend before the server gets it (fault injection, observation). */
    wrapBackend?: (backend: Backend) => Backend;
  } & Partial<Omit<SpillwayServerOptions, "backend">> = {},
): Promise<TestServer> {
  const dataDir = await mkdtemp(join(tmpdir(), "spillway-test-"));
  const base = await createTestBackend(opts.backend ?? "filesystem", dataDir);
  const backend = opts.wrapBackend === undefined ? base : opts.wrapBackend(base);
  let tokenFile: string | undefined;
  if (opts.tokens !== undefined) {
    tokenFile = join(dataDir, "tokens");
    await writeFile(
      tokenFile,
      Object.entries(opts.tokens)
        .map(([token, tenant]) => `${hashToken(token)} ${tenant}\n`)
        .join(""),
    );
  }
  const server = await startSpillwayServer({ ...opts, backend, port: 0, tokenFile });
  const transportFor = (token?: string) =>
    createGrpcTransport({
      baseUrl: server.url,
      readMaxBytes: 64 * 1024 * 1024,
      interceptors: [
        (next) => (req) => {
          if (token !== undefined) req.header.set("authorization", `Bearer ${token}`);
          return next(req);
        },
      ],
    });
  return {
    url: server.url,
    dataDir,
    backend,
    server,
    // The SDK on its own gRPC transport; raw calls go through connect-node's, so both meet
    // the server.
    sdk: (token) =>
      createSpillwayClient({ baseUrl: server.url, ...(token === undefined ? {} : { token }) }),
    raw: (token) => createClient(SpillwayService, transportFor(token)),
    async stop() {
      await server.close(1000);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function createTestBackend(kind: TestBackendKind, dataDir: string): Promise<Backend> {
  if (kind === "memory") return createMemoryBackend();
  if (kind === "filesystem") return createFilesystemBackend({ root: join(dataDir, "store") });
  const servers = inject("objectServers");
  const minio =
    kind === "s3-seaweedfs" ? servers.seaweedfs : kind === "s3-moto" ? servers.moto : servers.minio;
  const bucket = `svc-${randomBytes(6).toString("hex")}`;
  const s3 = createTestS3Client(minio);
  try {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  } finally {
    s3.destroy();
  }
  return createS3Backend({
    bucket,
    prefix: "spillway",
    endpoint: minio.endpoint,
    region: minio.region,
    forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
  });
}
