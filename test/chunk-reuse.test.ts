import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/backends/backend.js";
import { readChunkBytes } from "../server/backends/chunk-pool.js";
import { readBack, sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * The filesystem backend lends its read chunks from a pool; the gRPC writer and the search
 * window hand them back. Here every chunk handed back is overwritten at once, so a chunk
 * handed back while anything still reads it (a write in flight, a line that goes on into the
 * next chunk) turns into wrong bytes or lost matches.
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

/** A text payload of about `bytes` bytes in which the lines crossing each chunk boundary hold `marker`. */
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
  let boundary = readChunkBytes;
  for (let k = 0; k < lines.length; k++) {
    const line = lines[k] as string;
    const end = at + Buffer.byteLength(line);
    if (at < boundary && end > boundary) {
      // The marker starts the line, before the boundary: only bytes kept across chunks hold it.
      lines[k] = `${marker} ${line}`;
      marked.push(k + 1);
      boundary += readChunkBytes;
    }
    at = end;
  }
  return { text: lines.join(""), marked };
}

describe("read chunks handed back for reuse", () => {
  const released = { count: 0 };
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ wrapBackend: (b) => poisonReleased(b, released) });
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
