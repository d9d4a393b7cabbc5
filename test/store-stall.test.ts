import { readFile } from "node:fs/promises";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { readAllBytes } from "../server/src/backends/body.js";
import { createMinioBackend } from "../server/src/backends/minio.js";
import { createS3Backend } from "../server/src/backends/s3.js";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { failureOf } from "./support/code-of.js";
import { type ObjectServer, startObjectServer, waitFor } from "./support/object-server.js";
import { createTestS3Client } from "./support/s3-client.js";

/** The store request timeout these tests give the backends. */
const timeoutMs = 1_000;
/** "Does not hang": a bound several times the timeout, generous for a busy host. */
const answerWithinMs = 10 * timeoutMs;

/**
 * A store that stops answering — MinIO frozen with SIGSTOP, its sockets open and silent —
 * must not hang calls: every store request is bounded, fails UNAVAILABLE saying so, frees the
 * caller's in-flight slot, counts as a backend error, and turns health NOT_SERVING until the
 * store answers again. Both object-store backends, against a real MinIO.
 */
describe.each(["s3", "minio"] as const)("a frozen store (%s backend)", (kind) => {
  let minio: ObjectServer;
  let frozen = false;
  const servers: SpillwayServer[] = [];
  const backends: Backend[] = [];

  const backend = (requestTimeoutMs = timeoutMs): Backend => {
    const made =
      kind === "s3"
        ? createS3Backend({
            bucket: "stall",
            endpoint: minio.endpoint,
            region: minio.region,
            forcePathStyle: true,
            credentials: {
              accessKeyId: minio.accessKeyId,
              secretAccessKey: minio.secretAccessKey,
            },
            requestTimeoutMs,
          })
        : createMinioBackend({
            endPoint: "127.0.0.1",
            port: Number(new URL(minio.endpoint).port),
            bucket: "stall",
            region: minio.region,
            accessKey: minio.accessKeyId,
            secretKey: minio.secretAccessKey,
            requestTimeoutMs,
          });
    backends.push(made);
    return made;
  };
  /** Stops MinIO with SIGSTOP and resolves once the kernel reports it stopped (state T). */
  const freeze = async () => {
    const pid = minio.pid();
    if (pid === undefined) throw new Error("minio is not running");
    process.kill(pid, "SIGSTOP");
    frozen = true;
    await waitFor(
      async () => / T /.test(await readFile(`/proc/${pid}/stat`, "utf8")),
      answerWithinMs,
    );
  };
  const thaw = () => {
    const pid = minio.pid();
    if (frozen && pid !== undefined) process.kill(pid, "SIGCONT");
    frozen = false;
  };
  /** Resolves with how long `call` took to settle, and its error when it failed. */
  const timed = async (call: Promise<unknown>) => {
    const started = performance.now();
    const error = await failureOf(call).catch(() => undefined);
    return { ms: performance.now() - started, error };
  };

  beforeAll(async () => {
    minio = await startObjectServer("minio");
    const s3 = createTestS3Client(minio);
    await s3.send(new CreateBucketCommand({ Bucket: "stall" }));
    s3.destroy();
  });
  afterEach(() => thaw());
  afterAll(async () => {
    thaw();
    for (const server of servers) await server.close(1000);
    for (const made of backends) await made.close();
    await minio.stop();
  });

  it("fails each backend call UNAVAILABLE once the store stops answering", async () => {
    const store = backend();
    await store.put(
      "t/k/one",
      (async function* () {
        yield Buffer.from("stored before the freeze\n");
      })(),
    );
    await freeze();
    for (const call of [
      () => store.head("t/k/one"),
      () => store.get("t/k/one").then((body) => readAllBytes(body)),
      () => store.list("t/"),
      () =>
        store.put(
          "t/k/two",
          (async function* () {
            yield Buffer.from("written during the freeze\n");
          })(),
        ),
      () => store.delete("t/k/one"),
    ]) {
      const { ms, error } = await timed(call());
      expect(error?.code).toBe(Code.Unavailable);
      expect(error?.rawMessage).toBe("the object store did not answer within 1 s");
      expect(ms).toBeLessThan(answerWithinMs);
    }
    thaw();
    // The store answers again: the cancelled requests left the backend usable.
    expect(await store.head("t/k/one")).toMatchObject({ size: 25 });
  });

  it("cancels a stalled call at once when its caller aborts", async () => {
    const store = backend(600_000);
    await freeze();
    const controller = new AbortController();
    const pending = timed(store.list("t/", { signal: controller.signal }));
    setTimeout(() => controller.abort(), 200);
    const { ms, error } = await pending;
    expect(error?.code).toBe(Code.Canceled);
    expect(ms).toBeLessThan(answerWithinMs);
  });

  it("does not cut a body the reader reads slowly", async () => {
    const store = backend();
    const bytes = Buffer.alloc(4 * 1024 * 1024, 7);
    await store.put(
      "t/k/slow",
      (async function* () {
        yield bytes;
      })(),
    );
    let read = 0;
    let pauses = 0;
    for await (const chunk of await store.get("t/k/slow")) {
      read += chunk.byteLength;
      // The reader holds the stream longer than the timeout, twice: the store is not to blame.
      if (pauses < 2 && read > pauses * 1024 * 1024) {
        pauses++;
        await new Promise((resolve) => setTimeout(resolve, 1.5 * timeoutMs));
      }
    }
    expect(read).toBe(bytes.byteLength);
  });

  it("turns health NOT_SERVING from the readiness probe alone, with no call failing", async () => {
    // A store timeout longer than the test: only the probe's own 2 s bound can see the freeze.
    const server = await startSpillwayServer({
      backend: backend(600_000),
      port: 0,
      storeProbeIntervalMs: 500,
    });
    servers.push(server);
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    const status = async () => (await health.check({ service: "" })).status;
    expect(await status()).toBe(ServingStatus.SERVING);
    await freeze();
    await waitFor(async () => (await status()) === ServingStatus.NOT_SERVING, answerWithinMs);
    thaw();
    await waitFor(async () => (await status()) === ServingStatus.SERVING, answerWithinMs);
  });

  it("answers calls UNAVAILABLE, frees the tenant's slots, counts the fault and turns health NOT_SERVING", async () => {
    const metrics: Metrics = createMetrics();
    const server = await startSpillwayServer({
      backend: backend(),
      port: 0,
      metrics,
      maxCallsPerTenant: 4,
      storeProbeIntervalMs: 500,
    });
    servers.push(server);
    const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    const status = async () => (await health.check({ service: "" })).status;
    const stored = await spillway.offload(
      { tenant: "dev", runId: "r", callId: "before" },
      "kept line\n".repeat(20_000),
    );
    expect(await status()).toBe(ServingStatus.SERVING);

    await freeze();
    // More calls than the tenant's slots, none with a deadline of its own.
    const reads = await Promise.all(
      Array.from({ length: 6 }, () =>
        timed(
          spillway.readToolOutput({
            runId: "r",
            handle: stored.handle,
            window: { case: "lines", value: { offset: 100n, limit: 5 } },
          }),
        ),
      ),
    );
    // Four take the tenant's slots and time out; the rest are refused for want of a slot.
    for (const { ms, error } of reads) {
      expect([Code.Unavailable, Code.ResourceExhausted]).toContain(error?.code);
      expect(ms).toBeLessThan(answerWithinMs);
    }
    expect(reads.filter(({ error }) => error?.code === Code.Unavailable).length).toBe(4);
    expect(reads.some(({ error }) => error?.rawMessage.includes("did not answer within 1 s"))).toBe(
      true,
    );
    // Their slots are free again: a call that needs no store is served.
    expect((await spillway.raw.getServerInfo({})).backend).toBe(kind);
    const counted = await metrics.registry.getSingleMetricAsString("spillway_backend_errors_total");
    expect(counted).toMatch(new RegExp(`backend="${kind}",grpc_code="Unavailable"} [1-9]`));
    await waitFor(async () => (await status()) === ServingStatus.NOT_SERVING, answerWithinMs);

    thaw();
    await waitFor(async () => (await status()) === ServingStatus.SERVING, answerWithinMs);
    const again = await spillway.readToolOutput({
      runId: "r",
      handle: stored.handle,
      window: { case: "lines", value: { offset: 100n, limit: 1 } },
    });
    expect(again.rendered).toContain("kept line");
  });
});
