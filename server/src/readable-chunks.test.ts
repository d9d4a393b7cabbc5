import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { readableChunks } from "./readable-chunks.js";

/** Lets the stream's queued events run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("readableChunks", () => {
  it("yields each chunk the stream emitted, unmerged and in order, then ends", async () => {
    const stream = new PassThrough();
    const written = [Buffer.from("one"), Buffer.from("two"), Buffer.from("three")];
    for (const chunk of written) stream.write(chunk);
    stream.end();
    await turn();
    const got: Buffer[] = [];
    for await (const chunk of readableChunks(stream, 1 << 20)) got.push(chunk);
    // Node's own iterator would have joined the three buffered chunks into one.
    expect(got).toEqual(written);
  });

  it("pauses the stream above the bound and resumes it once the consumer has taken chunks", async () => {
    const stream = new PassThrough();
    const it = readableChunks(stream, 8)[Symbol.asyncIterator]();
    stream.write(Buffer.alloc(5));
    await turn();
    expect(stream.isPaused()).toBe(false);
    stream.write(Buffer.alloc(5));
    await turn();
    expect(stream.isPaused()).toBe(true);
    // Paused: what the producer writes now stays in the stream, not in the queue.
    stream.write(Buffer.alloc(7));
    await turn();
    expect(stream.readableLength).toBe(7);
    // Taking a chunk brings the queue below the bound: the stream flows again and hands its
    // chunk over (which pauses it once more).
    expect(((await it.next()).value as Buffer).byteLength).toBe(5);
    await turn();
    expect(stream.readableLength).toBe(0);
    expect(((await it.next()).value as Buffer).byteLength).toBe(5);
    expect(((await it.next()).value as Buffer).byteLength).toBe(7);
    stream.end();
    expect((await it.next()).done).toBe(true);
  });

  it("throws the stream's error, dropping chunks still queued", async () => {
    const stream = new PassThrough();
    const it = readableChunks(stream, 1 << 20)[Symbol.asyncIterator]();
    stream.write(Buffer.from("kept?"));
    await turn();
    stream.destroy(new Error("reset by peer"));
    await turn();
    await expect(it.next()).rejects.toThrow("reset by peer");
  });

  it("reports a stream closed before its end as a premature close", async () => {
    const stream = new PassThrough();
    const it = readableChunks(stream, 1 << 20)[Symbol.asyncIterator]();
    const next = it.next();
    stream.destroy();
    await expect(next).rejects.toMatchObject({ code: "ERR_STREAM_PREMATURE_CLOSE" });
  });

  it("leaves the stream paused, its rest unread, when the consumer stops early", async () => {
    const stream = new PassThrough();
    stream.write(Buffer.from("a"));
    for await (const chunk of readableChunks(stream, 1 << 20)) {
      expect(chunk.toString()).toBe("a");
      break;
    }
    stream.write(Buffer.from("b"));
    await turn();
    expect(stream.destroyed).toBe(false);
    expect(stream.isPaused()).toBe(true);
    expect(stream.listenerCount("data")).toBe(0);
    // Its owner can still read the rest.
    expect(String(stream.read())).toBe("b");
  });
});
