import { randomBytes } from "node:crypto";
import * as http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import {
  type ChunkPool,
  createChunkPool,
  firstReadBytes,
  readChunkBytes,
} from "../server/src/backends/chunk-pool.js";
import { type OffloadRequestInit, offloadEnvelope, openGrpcStream } from "./support/raw-grpc.js";
import { readBack, sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * Chunks lent from pools and handed back for reuse. The filesystem backend lends its read
 * chunks; the gRPC writer and the search window hand them back. The gRPC handler assembles
 * request messages in pooled chunks; Offload hands them back. Here every chunk handed back is
 * overwritten at once, so a chunk handed back while anything still reads it (a write in
 * flight, a line that goes on into the next chunk, a part not yet uploaded, the head of an
 * inline record) turns into wrong bytes or lost matches.
 */
function poisonReleased(base: Backend, released: { count: number }): Backend {
  return {
    ...base,
    release(chunk) {
      released.count++;
      new Uint8Array(chunk.buffer, 0, chunk.buffer.byteLength).fill(0xee);
      base.release?.(chunk);
    },
  };
}

/**
 * A text payload of about `bytes` bytes in which the lines crossing each multiple of
 * firstReadBytes hold `marker`: every chunk boundary of a read from the start is one of them.
 */
function textWithMarkedBoundaryLines(bytes: number, marker: string) {
  const lines: string[] = [];
  let size = 0;
  for (let k = 0; size < bytes; k++) {
    const line = `line ${k} ${"abcdefghij".repeat(k % 37)}\n`;
    lines.push(line);
    size += Buffer.byteLength(line);
  }
  const marked: number[] = [];
  let at = 0;
  let boundary = firstReadBytes;
  for (let k = 0; k < lines.length; k++) {
    const line = lines[k] as string;
    const end = at + Buffer.byteLength(line);
    if (at < boundary && end > boundary) {
      // The marker starts the line, before the boundary: only bytes kept across chunks hold it.
      lines[k] = `${marker} ${line}`;
      marked.push(k + 1);
      boundary += firstReadBytes;
    }
    at = end;
  }
  return { text: lines.join(""), marked };
}

describe("read chunks handed back for reuse", () => {
  const released = { count: 0 };
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({
      wrapBackend: (b) => poisonReleased(b, released),
      // One line-index entry for these payloads: a lines window then reads from byte 0 through
      // the chunk boundaries the marked lines straddle (with entries near it, a window reads
      // only the span its lines lie in, in one small read that takes no pooled chunk).
      limits: { indexStride: 1_000_000 },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("are never reused while a concurrent or slow bytes read still sends them", async () => {
    const sdk = server.sdk();
    const payloads = [0, 1, 2].map((i) => randomBytes(3 * readChunkBytes + 1000 * (i + 1)));
    const handles = await Promise.all(
      payloads.map(async (data, i) => {
        const attachment = await sdk.offload(
          { tenant: "dev", runId: "reuse", callId: `b${i}` },
          data,
        );
        return attachment.handle;
      }),
    );
    const before = released.count;
    const slow = (async () => {
      const parts: Uint8Array[] = [];
      for await (const frame of sdk.raw.readToolOutput({
        runId: "reuse",
        handle: handles[0] as string,
        omitRendered: true,
        window: { case: "bytes", value: { offset: 0n } },
      })) {
        if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
          parts.push(frame.frame.value.body.value);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      return Buffer.concat(parts);
    })();
    const reads = await Promise.all(
      [0, 1, 2, 0, 1, 2].map((i) => readBack(sdk, "reuse", handles[i] as string)),
    );
    reads.forEach((got, k) => {
      expect(sha256(got)).toBe(sha256(payloads[k % 3] as Buffer));
    });
    expect(sha256(await slow)).toBe(sha256(payloads[0] as Buffer));
    expect(released.count - before).toBeGreaterThan(0);
  });

  it("are never reused while a lines window still holds a line that crosses into the next chunk", async () => {
    const sdk = server.sdk();
    const marker = "NEEDLE-4c1d";
    const { text, marked } = textWithMarkedBoundaryLines(3 * readChunkBytes, marker);
    // Every line ends with "\n": the text after the last one is no line.
    const lines = text.slice(0, -1).split("\n");
    const { handle } = await sdk.offload({ tenant: "dev", runId: "reuse", callId: "l" }, text);
    const before = released.count;
    // Every window starts two lines before a line that crosses a chunk boundary; windows read
    // one after another reuse the chunks the previous ones handed back.
    for (const number of marked) {
      const win = await sdk.readToolOutput({
        runId: "reuse",
        handle,
        window: { case: "lines", value: { offset: BigInt(number - 3), limit: 5 } },
      });
      const shown: string[] = [];
      for (const frame of win.frames) {
        if (frame.frame.case === "content" && frame.frame.value.body.case === "lines") {
          for (const line of frame.frame.value.body.value.lines) shown.push(line.text);
        }
      }
      expect(shown).toEqual(lines.slice(number - 3, number + 2));
    }
    expect(released.count - before).toBeGreaterThan(marked.length);
  });

  it("are never reused while a search still holds a line that crosses into the next chunk", async () => {
    const sdk = server.sdk();
    const marker = "NEEDLE-7f3a";
    const { text, marked } = textWithMarkedBoundaryLines(5 * readChunkBytes, marker);
    expect(marked.length).toBeGreaterThanOrEqual(4);
    const { handle } = await sdk.offload({ tenant: "dev", runId: "reuse", callId: "s" }, text);
    for (const regex of [false, true]) {
      const before = released.count;
      const win = await sdk.readToolOutput({
        runId: "reuse",
        handle,
        window: { case: "search", value: { pattern: regex ? `NEEDLE-[0-9a-f]+` : marker, regex } },
      });
      const numbers: number[] = [];
      for (const frame of win.frames) {
        if (frame.frame.case === "content" && frame.frame.value.body.case === "matches") {
          for (const m of frame.frame.value.body.value.matches) {
            numbers.push(Number(m.line?.number));
            expect(m.line?.text.startsWith(`${marker} line `)).toBe(true);
          }
        }
      }
      expect(numbers).toEqual(marked);
      expect(win.trailer?.totalMatches).toBe(BigInt(marked.length));
      expect(released.count - before).toBeGreaterThan(0);
    }
  });
});

/**
 * A request-chunk pool that overwrites every chunk it lent the moment it is handed back (a
 * message that arrived in one piece is a view of Node's read buffer and is left alone).
 */
function poisonedPool(released: { count: number }): ChunkPool {
  const base = createChunkPool(1024 * 1024 + 16, 8);
  const lent = new WeakSet<ArrayBufferLike>();
  return {
    take(bytes) {
      const chunk = base.take(bytes);
      lent.add(chunk.buffer);
      return chunk;
    },
    give(chunk) {
      if (lent.delete(chunk.buffer)) {
        released.count++;
        new Uint8Array(chunk.buffer, 0, chunk.buffer.byteLength).fill(0xee);
      }
      base.give(chunk);
    },
  };
}

/**
 * Offloads `data` in chunks of `size` bytes over a raw HTTP/2 stream, writing each message in
 * two parts that wait for each other, so that every message spans two DATA frames.
 */
async function offloadInSplitFrames(
  url: string,
  key: { runId: string; callId: string },
  data: Buffer,
  size: number,
): Promise<void> {
  const session = http2.connect(url);
  try {
    const stream = openGrpcStream(session, "Offload");
    let status: string | undefined;
    stream.on("trailers", (t) => {
      status = String(t["grpc-status"]);
    });
    stream.on("response", (h) => {
      if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
    });
    stream.on("data", () => {});
    const closed = new Promise((resolve) => stream.on("close", resolve));
    const write = (bytes: Uint8Array) =>
      new Promise<void>((resolve, reject) =>
        stream.write(bytes, (err) => (err ? reject(err) : resolve())),
      );
    const send = async (message: OffloadRequestInit) => {
      const frame = offloadEnvelope(message);
      const cut = Math.floor(frame.length / 2);
      await write(frame.subarray(0, cut));
      await new Promise((resolve) => setTimeout(resolve, 2));
      await write(frame.subarray(cut));
    };
    await send({ msg: { case: "header", value: { key: { tenant: "dev", ...key } } } });
    for (let at = 0; at < data.length; at += size) {
      await send({ msg: { case: "chunk", value: data.subarray(at, at + size) } });
    }
    stream.end();
    await closed;
    expect(status).toBe("0");
  } finally {
    session.close();
  }
}

describe.each(["filesystem", "s3-minio", "memory"] as const)(
  "request chunks handed back for reuse (%s)",
  (backend) => {
    const released = { count: 0 };
    let server: TestServer;

    beforeAll(async () => {
      server = await startTestServer({ backend, requestChunks: poisonedPool(released) });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it("are never reused before the store has the bytes, however large the payload", async () => {
      const sdk = server.sdk();
      // Past the s3 backend's 8 MiB part size, so parts are assembled from many chunks.
      const payloads = [0, 1, 2].map((i) => randomBytes(9 * 1024 * 1024 + 777 * (i + 1)));
      const before = released.count;
      const handles = await Promise.all(
        payloads.map(async (data, i) => {
          const attachment = await sdk.offload(
            { tenant: "dev", runId: "req", callId: `l${i}` },
            data,
          );
          expect(attachment.sha256).toBe(sha256(data));
          return attachment.handle;
        }),
      );
      for (const [i, handle] of handles.entries()) {
        expect(sha256(await readBack(sdk, "req", handle))).toBe(sha256(payloads[i] as Buffer));
      }
      expect(released.count - before).toBeGreaterThan(0);
    });

    it("keeps the JSON a preview is built from while the stream goes on", async () => {
      const sdk = server.sdk();
      const json = Array.from({ length: 60_000 }, (_, i) => ({ id: i, name: `item ${i}` }));
      const before = released.count;
      const attachment = await sdk.offload(
        { tenant: "dev", runId: "req", callId: "json" },
        { json },
        { contentType: "application/json" },
      );
      expect(released.count - before).toBeGreaterThan(0);
      expect(attachment.sha256).toBe(sha256(JSON.stringify(json)));
      // Built from the whole document: a copy that went bad would not parse, leaving no shape.
      expect(attachment.preview?.shape).toContain("name");
    });

    it("keeps what an inline record holds while the stream goes on", async () => {
      const sdk = server.sdk();
      const data = randomBytes(12 * 1024);
      const before = released.count;
      // Each chunk in two DATA frames, so the server assembles it in a pooled chunk.
      await offloadInSplitFrames(server.url, { runId: "req", callId: "small" }, data, 1000);
      expect(released.count - before).toBeGreaterThan(0);
      const attachment = await sdk.stat("req", "res_small");
      expect(attachment.sha256).toBe(sha256(data));
      expect(sha256(await readBack(sdk, "req", attachment.handle))).toBe(sha256(data));
      // A replay of the same bytes is recognised as the record already committed.
      const again = await sdk.offloadResult({ tenant: "dev", runId: "req", callId: "small" }, data);
      expect(again.created).toBe(false);
    });
  },
);
