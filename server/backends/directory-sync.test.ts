import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createDirectorySync, fsyncDirectoryEntries } from "./directory-sync.js";

/** Wraps the real fsync to record when each one starts and ends. */
function watched() {
  const events: string[] = [];
  let n = 0;
  const fsync = async (dir: string) => {
    const id = ++n;
    events.push(`start ${id}`);
    await fsyncDirectoryEntries(dir);
    events.push(`end ${id}`);
  };
  return { events, fsync, count: () => n };
}

describe("createDirectorySync", () => {
  it("serves 64 concurrent callers with two fsyncs, each caller after one that began after it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-dirsync-"));
    const w = watched();
    const sync = createDirectorySync(w.fsync);
    const first = sync.sync(dir).then(() => w.events.push("first done"));
    const rest = Array.from({ length: 63 }, () => sync.sync(dir).then(() => w.events.push("rest")));
    await Promise.all([first, ...rest]);
    expect(w.count()).toBe(2);
    // The first caller started fsync 1; the others arrived while it ran, so they wait for 2.
    expect(w.events.indexOf("first done")).toBeGreaterThan(w.events.indexOf("end 1"));
    expect(w.events.indexOf("rest")).toBeGreaterThan(w.events.indexOf("end 2"));
    expect(w.events.indexOf("start 2")).toBeGreaterThan(w.events.indexOf("end 1"));
  });

  it("starts a fresh fsync for a caller that comes after the others finished", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-dirsync-"));
    const w = watched();
    const sync = createDirectorySync(w.fsync);
    await sync.sync(dir);
    await sync.sync(dir);
    expect(w.count()).toBe(2);
  });

  it("rejects every caller sharing a failed fsync, and recovers for the next one", async () => {
    const missing = join(tmpdir(), `spillway-dirsync-missing-${process.pid}-${Date.now()}`);
    const sync = createDirectorySync();
    const results = await Promise.allSettled([sync.sync(missing), sync.sync(missing)]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/ENOENT/);
    const dir = await mkdtemp(join(tmpdir(), "spillway-dirsync-"));
    await expect(sync.sync(dir)).resolves.toBeUndefined();
  });
});
