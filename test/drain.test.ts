import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "../clients/ts/src/gen/grpc/health/v1/health_pb.js";
import {
  OffloadRequestSchema,
  SpillwayService,
} from "../clients/ts/src/gen/spillway/v1/spillway_pb.js";
import { createMemoryBackend } from "../server/backends/memory.js";
import { startSpillwayServer } from "../server/server.js";

describe("graceful drain", () => {
  it("turns health NOT_SERVING, lets an in-flight offload finish, then stops", async () => {
    // The backend tells the test when the offload handler is running (past the drain gate).
    const base = createMemoryBackend();
    let handlerRunning: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      handlerRunning = resolve;
    });
    // Its first store call is the deleted-run check, a head.
    const backend = {
      ...base,
      head: (...args: Parameters<typeof base.head>) => {
        handlerRunning();
        return base.head(...args);
      },
    };
    const server = await startSpillwayServer({ backend, port: 0 });
    const transport = createGrpcTransport({ baseUrl: server.url });
    const health = createClient(Health, transport);
    const spillway = createClient(SpillwayService, transport);

    const statuses: ServingStatus[] = [];
    let watchStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      watchStarted = resolve;
    });
    const watching = (async () => {
      for await (const res of health.watch({ service: "" })) {
        statuses.push(res.status);
        watchStarted();
        if (res.status === ServingStatus.NOT_SERVING) return;
      }
    })();
    await started;

    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const inFlight = spillway.offload(
      (async function* () {
        yield create(OffloadRequestSchema, {
          msg: { case: "header", value: { key: { tenant: "dev", runId: "r", callId: "late" } } },
        });
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: randomBytes(64_000) } });
        await gate;
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: randomBytes(64_000) } });
      })(),
    );
    await running;
    const closing = server.close(10_000);
    await watching;
    release();
    const res = await inFlight;
    await closing;

    expect(statuses).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    expect(res.attachment?.sizeBytes).toBe(128_000n);
  });
});
