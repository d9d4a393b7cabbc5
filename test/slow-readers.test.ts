import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const MiB = 1024 * 1024;

/** rssBytes reads a process's resident set size from /proc. */
async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (kib === undefined) throw new Error("no VmRSS in /proc status");
  return Number(kib) * 1024;
}

/** openFiles counts the regular files a process holds open (payload blobs, not sockets). */
/**
 * Counts the descriptors the server holds on files under `under` of at least `minBytes`: the
 * payload the readers stream, not the small files (records, line indexes) the filesystem
 * backend keeps open between small reads.
 */
async function openFiles(pid: number, under: string, minBytes = 64 * MiB): Promise<number> {
  let count = 0;
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    try {
      const path = `/proc/${pid}/fd/${fd}`;
      if ((await readlink(path)).startsWith(under) && (await stat(path)).size >= minBytes) count++;
    } catch {
      // The descriptor closed while we looked.
    }
  }
  return count;
}

/**
 * Slow and abandoned readers: the server streams with backpressure, so readers that stop
 * consuming cost it at most their flow-control windows, not the payload; readers that cancel
 * release their file handles. Measured on the real `spillway serve` process.
 */
describe("slow and abandoned readers", () => {
  let server: SpillwayProcess | undefined;
  let dataDir: string;
  let client: SpillwayClient;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "spillway-slow-"));
    server = await spawnSpillway(["--data-dir", join(dataDir, "d")]);
    client = createSpillwayClient({ baseUrl: server.url });
  });
  afterAll(async () => {
    server?.kill();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("keeps server memory bounded under stalled full reads and frees cancelled ones", async () => {
    const pid = server?.pid;
    if (pid === undefined) throw new Error("the server did not start");
    const payload = randomBytes(192 * MiB);
    await client.offload({ tenant: "dev", runId: "slow", callId: "big" }, payload);
    const idle = await rssBytes(pid);

    // Six readers each ask for all 192 MiB and then stop reading after their first frame.
    const controllers = Array.from({ length: 6 }, () => new AbortController());
    const stalled = controllers.map(async (controller) => {
      const frames = client.raw.readToolOutput(
        {
          runId: "slow",
          handle: "res_big",
          window: { case: "bytes", value: { offset: 0n } },
          omitRendered: true,
        },
        { signal: controller.signal },
      );
      const iterator = frames[Symbol.asyncIterator]();
      await iterator.next();
      return iterator;
    });
    const iterators = await Promise.all(stalled);
    // Let the server push whatever flow control allows into the stalled streams.
    let peak = 0;
    for (let i = 0; i < 20; i++) {
      peak = Math.max(peak, await rssBytes(pid));
      await new Promise((r) => setTimeout(r, 100));
    }
    const opened = await openFiles(pid, dataDir);

    for (const controller of controllers) controller.abort();
    for (const iterator of iterators) {
      await iterator.next().catch((err: unknown) => {
        expect(ConnectError.from(err).code).toBe(Code.Canceled);
      });
    }
    let left = opened;
    for (let i = 0; i < 100 && left > 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      left = await openFiles(pid, dataDir);
    }

    console.info(
      `slow readers: idle RSS ${Math.round(idle / MiB)} MiB, peak ${Math.round(peak / MiB)} MiB, ` +
        `${opened} payload files open while stalled, ${left} after cancel`,
    );
    // Six full reads of 192 MiB would be 1.1 GiB if the server buffered them.
    expect(peak - idle).toBeLessThan(256 * MiB);
    expect(opened).toBeGreaterThan(0);
    expect(left).toBe(0);
    // The server still serves after the cancelled streams.
    const head = await client.readToolOutput({
      runId: "slow",
      handle: "res_big",
      window: { case: "bytes", value: { offset: 0n, limit: 16n } },
    });
    expect(head.trailer?.returnedBytes).toBe(16n);
  });
});

/**
 * A fast reader: the server must drop each frame once sent. Its payload is written through a
 * second server on the same data dir, so the reading process starts from its idle footprint.
 */
describe("fast readers", () => {
  it("holds none of the frames it already sent while a reader takes the whole payload", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "spillway-fast-"));
    const writer = await spawnSpillway(["--data-dir", join(dataDir, "d")]);
    const reader = await spawnSpillway(["--data-dir", join(dataDir, "d")]);
    try {
      await createSpillwayClient({ baseUrl: writer.url }).offload(
        { tenant: "dev", runId: "fast", callId: "big" },
        randomBytes(192 * MiB),
      );
      const client = createSpillwayClient({ baseUrl: reader.url });
      const idle = await rssBytes(reader.pid);
      let peak = idle;
      let received = 0;
      let frames = 0;
      for await (const frame of client.raw.readToolOutput({
        runId: "fast",
        handle: "res_big",
        window: { case: "bytes", value: { offset: 0n } },
        omitRendered: true,
      })) {
        if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
          received += frame.frame.value.body.value.byteLength;
          if (++frames % 8 === 0) peak = Math.max(peak, await rssBytes(reader.pid));
        }
      }
      console.info(
        `fast reader: idle RSS ${Math.round(idle / MiB)} MiB, peak ${Math.round(peak / MiB)} MiB`,
      );
      expect(received).toBe(192 * MiB);
      // A server that kept what it sent would grow by the whole 192 MiB read.
      expect(peak - idle).toBeLessThan(128 * MiB);
    } finally {
      writer.kill();
      reader.kill();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
