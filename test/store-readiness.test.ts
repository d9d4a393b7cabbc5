import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFilesystemBackend } from "../server/src/backends/filesystem.js";
import { createMinioBackend } from "../server/src/backends/minio.js";
import { createS3Backend } from "../server/src/backends/s3.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { codeOf } from "./support/code-of.js";
import { type ObjectServer, startObjectServer, waitFor } from "./support/object-server.js";
import { createTestS3Client } from "./support/s3-client.js";
import { scratchDir } from "./support/scratch-dir.js";

/** The statuses a load balancer sees for the whole server and for Spillway's service. */
async function statuses(server: SpillwayServer): Promise<[ServingStatus, ServingStatus]> {
  const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
  const whole = await health.check({ service: "" });
  const spillway = await health.check({ service: SpillwayService.typeName });
  return [whole.status, spillway.status];
}

/** Resolves once both statuses are `want` (within 20 s: a few probe intervals, on a busy host). */
function healthBecomes(server: SpillwayServer, want: ServingStatus): Promise<void> {
  return waitFor(async () => {
    const [whole, spillway] = await statuses(server);
    return whole === want && spillway === want;
  }, 20_000);
}

/**
 * Readiness follows the store: health answers NOT_SERVING for "" and for
 * spillway.v1.SpillwayService alike while the store cannot be used (MinIO stopped, the bucket
 * missing, the filesystem root gone), and SERVING again once it can, without a restart.
 */
describe("health reflects the store", () => {
  let minio: ObjectServer;
  const servers: SpillwayServer[] = [];
  const s3Backend = (bucket: string) =>
    createS3Backend({
      bucket,
      endpoint: minio.endpoint,
      region: minio.region,
      forcePathStyle: true,
      credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
    });
  const serve = async (opts: Parameters<typeof startSpillwayServer>[0]) => {
    const server = await startSpillwayServer(opts);
    servers.push(server);
    return server;
  };

  beforeAll(async () => {
    minio = await startObjectServer("minio");
    const s3 = createTestS3Client(minio);
    await s3.send(new CreateBucketCommand({ Bucket: "ready" }));
    s3.destroy();
  });
  afterAll(async () => {
    for (const server of servers) await server.close(1000);
    await minio.stop();
  });

  it("turns NOT_SERVING while MinIO is stopped and SERVING once it is back", async () => {
    const server = await serve({ backend: s3Backend("ready"), port: 0, storeProbeIntervalMs: 250 });
    expect(await statuses(server)).toEqual([ServingStatus.SERVING, ServingStatus.SERVING]);
    await minio.pause();
    await healthBecomes(server, ServingStatus.NOT_SERVING);
    await minio.restart();
    await healthBecomes(server, ServingStatus.SERVING);
    const spillway = createSpillwayClient({ baseUrl: server.url });
    expect(
      (await spillway.offload({ tenant: "dev", runId: "r", callId: "back" }, "ok\n")).handle,
    ).toBe("res_back");
  });

  it("probes at once when a call finds the store down, without waiting for the interval", async () => {
    const server = await serve({
      backend: s3Backend("ready"),
      port: 0,
      storeProbeIntervalMs: 600_000,
    });
    const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    await minio.pause();
    try {
      expect(
        await codeOf(spillway.offload({ tenant: "dev", runId: "r", callId: "x" }, "x\n")),
      ).toBe(Code.Unavailable);
      await healthBecomes(server, ServingStatus.NOT_SERVING);
    } finally {
      await minio.restart();
    }
  });

  it("is NOT_SERVING from the start while the bucket is missing, SERVING once it exists", async () => {
    const server = await serve({
      backend: s3Backend("created-later"),
      port: 0,
      storeProbeIntervalMs: 250,
    });
    expect(await statuses(server)).toEqual([ServingStatus.NOT_SERVING, ServingStatus.NOT_SERVING]);
    const s3 = createTestS3Client(minio);
    await s3.send(new CreateBucketCommand({ Bucket: "created-later" }));
    s3.destroy();
    await healthBecomes(server, ServingStatus.SERVING);
  });

  it("sees a missing bucket through the minio backend too", async () => {
    const server = await serve({
      backend: createMinioBackend({
        endPoint: "127.0.0.1",
        port: Number(new URL(minio.endpoint).port),
        bucket: "never-made",
        accessKey: minio.accessKeyId,
        secretKey: minio.secretAccessKey,
      }),
      port: 0,
      storeProbeIntervalMs: 250,
    });
    expect(await statuses(server)).toEqual([ServingStatus.NOT_SERVING, ServingStatus.NOT_SERVING]);
  });

  it("turns NOT_SERVING when the filesystem root is removed and SERVING once it is back", async () => {
    const root = join(scratchDir("spillway-ready-"), "data");
    const server = await serve({
      backend: createFilesystemBackend({ root }),
      port: 0,
      storeProbeIntervalMs: 250,
    });
    const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    expect(await statuses(server)).toEqual([ServingStatus.SERVING, ServingStatus.SERVING]);
    rmSync(root, { recursive: true });
    // Offloads fail now, as the store's fault: the backend never recreates its root.
    expect(
      await codeOf(spillway.offload({ tenant: "dev", runId: "r", callId: "gone" }, "x\n")),
    ).toBe(Code.FailedPrecondition);
    await healthBecomes(server, ServingStatus.NOT_SERVING);
    mkdirSync(root, { mode: 0o700 });
    await healthBecomes(server, ServingStatus.SERVING);
  });

  it("answers every call of a removed filesystem root FAILED_PRECONDITION, and a read probes at once", async () => {
    const root = join(scratchDir("spillway-ready-"), "data");
    // Only a probe triggered by a failing call can see the root go within the test.
    const server = await serve({
      backend: createFilesystemBackend({ root }),
      port: 0,
      storeProbeIntervalMs: 600_000,
    });
    const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    await spillway.offload({ tenant: "dev", runId: "r", callId: "small" }, "x\n");
    await spillway.offload({ tenant: "dev", runId: "r", callId: "big" }, "line\n".repeat(10_000));
    rmSync(root, { recursive: true });
    // A handle the run did record is not "forged", and a run that exists is not "not found":
    // the store is what failed.
    for (const handle of ["res_small", "res_big"]) {
      expect(
        await codeOf(
          spillway.readToolOutput({ runId: "r", handle, window: { case: "lines", value: {} } }),
        ),
        handle,
      ).toBe(Code.FailedPrecondition);
      expect(await codeOf(spillway.stat("r", handle)), handle).toBe(Code.FailedPrecondition);
    }
    expect(await codeOf(spillway.list("r"))).toBe(Code.FailedPrecondition);
    expect(await codeOf(spillway.listRuns())).toBe(Code.FailedPrecondition);
    expect(await codeOf(spillway.deleteRun("r"))).toBe(Code.FailedPrecondition);
    await healthBecomes(server, ServingStatus.NOT_SERVING);
  });
});
