import * as http2 from "node:http2";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import {
  OffloadRequestSchema,
  type ReadToolOutputResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFilesystemBackend } from "../server/src/backends/filesystem.js";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { codeOf } from "./support/code-of.js";
import { openGrpcStream } from "./support/raw-grpc.js";
import { connectJsonRequest, rawExchange } from "./support/raw-http.js";
import { readBack, sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const offloadProcedure = "spillway.v1.SpillwayService/Offload";
const readProcedure = "spillway.v1.SpillwayService/ReadToolOutput";

/** An Offload stream that sends its header and one chunk, then nothing until released. */
function stalledOffload(callId: string, gate: Promise<void>) {
  return (async function* () {
    yield create(OffloadRequestSchema, {
      msg: { case: "header", value: { key: { tenant: "dev", runId: "r", callId } } },
    });
    yield create(OffloadRequestSchema, { msg: { case: "chunk", value: new Uint8Array(100_000) } });
    await gate;
  })();
}

function gated(): { gate: Promise<void>; release: () => void } {
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { gate, release };
}

/** Resolves once the server has finished a call of procedure with code (polled, bounded). */
async function serverFinished(metrics: Metrics, procedure: string, code: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { values } = await metrics.handled.get();
    const done = (v: (typeof values)[number]) =>
      `${v.labels.grpc_service}/${v.labels.grpc_method}` === procedure &&
      v.labels.grpc_code === code;
    if (values.some(done)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`the server never finished ${procedure} with ${code}`);
}

/**
 * The status a unary gRPC call gets whose client sends its headers and never ends its request
 * (nothing sent, or a message and no end of stream): its grpc-status and grpc-message.
 */
async function unendedUnary(
  url: string,
  headers: http2.OutgoingHttpHeaders = {},
): Promise<{ status: string | undefined; message: string | undefined }> {
  const session = http2.connect(url);
  try {
    const stream = openGrpcStream(session, "GetServerInfo", headers);
    let status: string | undefined;
    let message: string | undefined;
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) {
        status = String(h["grpc-status"]);
        message = decodeURIComponent(String(h["grpc-message"] ?? ""));
      }
    };
    stream.on("response", take);
    stream.on("trailers", take);
    stream.resume();
    await new Promise((resolve) => {
      stream.on("close", resolve);
      stream.on("error", resolve);
      stream.on("trailers", resolve);
      stream.on("response", (h) => {
        if (h["grpc-status"] !== undefined) resolve(undefined);
      });
    });
    return { status, message };
  } finally {
    session.destroy();
  }
}

describe("server request deadline", () => {
  let t: TestServer;
  let metrics: Metrics;
  // A second replica on the same store, without a deadline, writes and checks large payloads,
  // so only the calls under test can reach the deadline however busy the machine is.
  let unbounded: SpillwayServer;
  beforeAll(async () => {
    metrics = createMetrics();
    t = await startTestServer({
      requestDeadlineMs: 2000,
      limits: { idleStreamMs: 600_000 },
      metrics,
    });
    unbounded = await startSpillwayServer({
      backend: createFilesystemBackend({ root: join(t.dataDir, "store") }),
      port: 0,
    });
  });
  afterAll(async () => {
    await unbounded.close(1000);
    await t.stop();
  });

  it("ends a unary call whose request never ends at the deadline, not at the idle limit", async () => {
    // Read whole before any interceptor, such a request waited for --idle-stream-ms (here 10
    // minutes) whatever the deadline.
    expect(await unendedUnary(t.url)).toEqual({
      status: String(Code.DeadlineExceeded),
      message: "the call ran longer than the server's request deadline of 2000 ms",
    });
  });

  it("ends an Offload stream still open at the deadline with DEADLINE_EXCEEDED, nothing committed", async () => {
    const { gate, release } = gated();
    try {
      const err = await t
        .raw()
        .offload(stalledOffload("stalled", gate))
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(err?.code).toBe(Code.DeadlineExceeded);
      expect(err?.rawMessage).toBe(
        "the call ran longer than the server's request deadline of 2000 ms",
      );
    } finally {
      release();
    }
    expect(await codeOf(t.sdk().stat("r", "res_stalled"))).toBe(Code.PermissionDenied);
    const data = "after the deadline\n".repeat(1000);
    await t.sdk().offload({ tenant: "dev", runId: "r", callId: "after" }, data);
    expect(sha256(await readBack(t.sdk(), "r", "res_after"))).toBe(sha256(data));
  });

  it("resets a read whose client stopped consuming once the deadline passes, and keeps serving", async () => {
    const writer = createSpillwayClient({ baseUrl: unbounded.url });
    const payload = new Uint8Array(32 * 1024 * 1024).fill(0x61);
    await writer.offload({ tenant: "dev", runId: "r", callId: "big" }, payload);
    const stream = t.raw().readToolOutput({
      runId: "r",
      handle: "res_big",
      omitRendered: true,
      window: { case: "bytes", value: {} },
    });
    const it = stream[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.done).toBe(false);
    // The client reads nothing more until the server has ended the call.
    await serverFinished(metrics, readProcedure, "DeadlineExceeded");
    let received = 0;
    const err = await (async () => {
      for (;;) {
        const step: IteratorResult<ReadToolOutputResponse> = await it.next();
        if (step.done === true) return undefined;
        const frame = step.value.frame;
        if (frame.case === "content" && frame.value.body.case === "data") {
          received += frame.value.body.value.byteLength;
        }
      }
    })().catch((e: unknown) => ConnectError.from(e));
    // The server recorded DEADLINE_EXCEEDED; a status cannot pass the unread frames, so this
    // client sees its stream reset.
    expect(err?.code).toBe(Code.Canceled);
    expect(received).toBeLessThan(payload.byteLength);
    expect(sha256(await readBack(writer, "r", "res_big"))).toBe(sha256(payload));
    expect((await t.sdk().stat("r", "res_big")).sizeBytes).toBe(BigInt(payload.byteLength));
  });
});

describe("client deadline", () => {
  let t: TestServer;
  let metrics: Metrics;
  beforeAll(async () => {
    metrics = createMetrics();
    t = await startTestServer({
      backend: "memory",
      limits: { idleStreamMs: 600_000 },
      metrics,
    });
  });
  afterAll(() => t.stop());

  it("ends a call at the client's grpc-timeout even when the client itself does not", async () => {
    const { gate, release } = gated();
    try {
      // The header is sent by hand, so only the server keeps the deadline.
      const err = await t
        .raw()
        .offload(stalledOffload("stalled", gate), { headers: { "grpc-timeout": "300m" } })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(err?.code).toBe(Code.DeadlineExceeded);
      await serverFinished(metrics, offloadProcedure, "DeadlineExceeded");
    } finally {
      release();
    }
    expect(await codeOf(t.sdk().stat("r", "res_stalled"))).toBe(Code.PermissionDenied);
    expect(
      (await t.sdk().offload({ tenant: "dev", runId: "r", callId: "ok" }, "ok")).sizeBytes,
    ).toBe(2n);
  });

  it("ends a unary call whose request never ends at the client's deadline, on every protocol", async () => {
    const grpc = await unendedUnary(t.url, { "grpc-timeout": "300m" });
    expect(grpc.status).toBe(String(Code.DeadlineExceeded));
    // Connect over HTTP/1.1: a body announced and never all sent.
    const partial = connectJsonRequest("/spillway.v1.SpillwayService/GetServerInfo", "{}", {
      "Connect-Timeout-Ms": "300",
    }).replace("Content-Length: 2", "Content-Length: 10");
    const connect = await rawExchange(t.url, (socket) => socket.write(partial), 20_000);
    // Ended at its deadline (the connection closes, as a request cut off mid-body leaves it no
    // use), not after --idle-stream-ms (10 minutes here), past this wait.
    expect(connect.closed).toBe(true);
  });

  it("keeps a client deadline of years, which Node's timers would have fired after 1 ms", async () => {
    // All valid: grpc-timeout takes eight digits of hours, Connect ten of milliseconds.
    for (const [i, headers] of [
      { "grpc-timeout": "99999999H" },
      { "grpc-timeout": "597H" },
      { "grpc-timeout": "36000000S" },
    ].entries()) {
      // Held open 100 ms: far past the 1 ms the overflowing timer waited.
      const { gate, release } = gated();
      setTimeout(release, 100);
      const offloaded = await t
        .raw()
        .offload(stalledOffload(`long-${i}`, gate), { headers })
        .then(
          (res) => res.attachment?.sizeBytes,
          (e: unknown) => ConnectError.from(e),
        );
      expect(offloaded, JSON.stringify(headers)).toBe(100_000n);
    }
  });
});
