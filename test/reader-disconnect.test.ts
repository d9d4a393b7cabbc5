import { randomBytes } from "node:crypto";
import * as net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { create, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FilesystemBackend, FilesystemReads } from "../server/src/backends/filesystem.js";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { waitFor } from "./support/wait-for.js";

const MiB = 1024 * 1024;
/** Chunks the filesystem backend reads ahead of all its readers together (filesystem.ts). */
const readAheadChunks = 16;
/** Stalled readers per test: each alone would read four chunks ahead without the shared bound. */
const readers = 8;

/** An HTTP/2 frame: 9-byte header, then the payload. */
function h2Frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(stream, 5);
  return Buffer.concat([header, payload]);
}

/** HPACK literal header fields without indexing, names and values under 127 bytes. */
function hpackLiterals(fields: readonly [string, string][]): Buffer {
  return Buffer.concat(
    fields.flatMap(([name, value]) => [
      Buffer.from([0, name.length]),
      Buffer.from(name),
      Buffer.from([value.length]),
      Buffer.from(value),
    ]),
  );
}

/**
 * openStalledReaders opens one HTTP/2 connection that asks for a bytes window of the whole of
 * `handle` on `count` streams and never reads its socket: the server writes until TCP's
 * buffers are full, then every response waits on the client. With `window` 0 the streams'
 * HTTP/2 windows are closed instead, so nothing is sent and the server keeps reading frames.
 * The client holds whatever the server sent; the returned socket is for the test to end.
 */
async function openStalledReaders(
  url: string,
  runId: string,
  handle: string,
  count: number,
  opts: { window: number; timeout?: string },
): Promise<{ socket: net.Socket; streams: number[] }> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on("error", () => {});
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  const request = Buffer.from(
    encodeEnvelope(
      0,
      toBinary(
        ReadToolOutputRequestSchema,
        create(ReadToolOutputRequestSchema, {
          runId,
          handle,
          window: { case: "bytes", value: { offset: 0n } },
          omitRendered: true,
        }),
      ),
    ),
  );
  const settings = Buffer.alloc(6);
  settings.writeUInt16BE(0x4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
  settings.writeUInt32BE(opts.window, 2);
  const connectionWindow = Buffer.alloc(4);
  connectionWindow.writeUInt32BE(2 ** 31 - 1 - 65_535);
  const frames = [
    Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    h2Frame(0x4, 0, 0, settings),
    h2Frame(0x8, 0, 0, connectionWindow),
  ];
  const streams = Array.from({ length: count }, (_, i) => 2 * i + 1);
  for (const stream of streams) {
    const headers = hpackLiterals([
      [":method", "POST"],
      [":scheme", "http"],
      [":path", "/spillway.v1.SpillwayService/ReadToolOutput"],
      [":authority", `${hostname}:${port}`],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ...(opts.timeout === undefined ? [] : [["grpc-timeout", opts.timeout] as [string, string]]),
    ]);
    frames.push(h2Frame(0x1, 0x4, stream, headers), h2Frame(0x0, 0x1, stream, request));
  }
  socket.write(Buffer.concat(frames));
  // No 'data' listener: the socket takes in its buffer's worth and then stops reading.
  return { socket, streams };
}

/** Waits until the backend's reads have stood still for a few polls in a row. */
async function readsSettled(backend: FilesystemBackend): Promise<FilesystemReads> {
  let last = backend.reads();
  let still = 0;
  while (still < 5) {
    await sleep(100);
    const now = backend.reads();
    still = now.bytes === last.bytes && now.ahead === last.ahead ? still + 1 : 0;
    last = now;
  }
  return last;
}

/** The ReadToolOutput calls in flight, from the server's own gauge. */
async function readsInFlight(metrics: Metrics): Promise<number> {
  const gauge = await metrics.registry.getSingleMetric("spillway_inflight_streams")?.get();
  return gauge?.values.find((v) => v.labels.grpc_method === "ReadToolOutput")?.value ?? 0;
}

/**
 * Bulk readers whose client stops reading and then goes away, the three ways a call ends
 * without reading its response: the connection drops, the stream is reset, the deadline
 * passes. Counted on the filesystem backend itself: the bytes it read from files, and the
 * reads it made ahead of readers that have not taken them.
 */
describe("bulk readers that stop reading and go away", () => {
  let t: TestServer;
  let backend: FilesystemBackend;
  let metrics: Metrics;
  const runId = "gone";
  let handle: string;

  beforeAll(async () => {
    metrics = createMetrics();
    // A response that waits this long on a client reading nothing ends the call (the deadline
    // test waits for that).
    t = await startTestServer({ metrics, limits: { idleStreamMs: 3_000 } });
    backend = t.backend as FilesystemBackend;
    const stored = await t
      .sdk()
      .offload({ tenant: "dev", runId, callId: "big" }, randomBytes(48 * MiB));
    handle = stored.handle;
  });
  afterAll(() => t.stop());

  it("read no more once the connection drops, and hold back nothing they read ahead", async () => {
    const { socket } = await openStalledReaders(t.url, runId, handle, readers, {
      window: 2 ** 31 - 1,
    });
    const stalled = await readsSettled(backend);
    // What waits ahead of readers that stopped is bounded for the whole server, not per reader.
    expect(stalled.ahead).toBeLessThanOrEqual(readAheadChunks);
    socket.resetAndDestroy();
    await waitFor(async () => (await readsInFlight(metrics)) === 0, 20_000);
    const after = backend.reads();
    console.info(
      `connection drop: ${readers} stalled readers read ${Math.round(stalled.bytes / MiB)} MiB, ` +
        `${stalled.ahead} reads ahead; ${((after.bytes - stalled.bytes) / MiB).toFixed(1)} MiB read after the drop`,
    );
    expect(after.bytes - stalled.bytes).toBe(0);
    expect(after.ahead).toBe(0);
  });

  it("read no more once their streams are reset", async () => {
    const before = backend.reads().bytes;
    const { socket, streams } = await openStalledReaders(t.url, runId, handle, readers, {
      window: 0,
    });
    const stalled = await readsSettled(backend);
    expect(stalled.ahead).toBeLessThanOrEqual(readAheadChunks);
    const cancel = Buffer.alloc(4);
    cancel.writeUInt32BE(0x8); // CANCEL
    socket.write(Buffer.concat(streams.map((stream) => h2Frame(0x3, 0, stream, cancel))));
    await waitFor(async () => (await readsInFlight(metrics)) === 0, 20_000);
    const after = backend.reads();
    console.info(
      `reset: ${readers} readers read ${Math.round((stalled.bytes - before) / MiB)} MiB, ` +
        `${((after.bytes - stalled.bytes) / MiB).toFixed(1)} MiB after the reset`,
    );
    expect(after.bytes - stalled.bytes).toBe(0);
    expect(after.ahead).toBe(0);
    socket.destroy();
  });

  it("read no more once their deadline passes", async () => {
    const { socket } = await openStalledReaders(t.url, runId, handle, readers, {
      window: 2 ** 31 - 1,
      timeout: "2S",
    });
    const stalled = await readsSettled(backend);
    expect(stalled.ahead).toBeGreaterThan(0);
    // The deadline passed while the readers stood still; the calls end when the response
    // has waited idleStreamMs on a client that reads nothing.
    await waitFor(async () => (await readsInFlight(metrics)) === 0, 20_000);
    const after = backend.reads();
    expect(after.bytes - stalled.bytes).toBe(0);
    expect(after.ahead).toBe(0);
    socket.destroy();
  });
});
