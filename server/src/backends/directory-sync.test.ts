import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../../test/support/scratch-dir.js";
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
  const scratch = scratchDir("spillway-dirsync-");

  it("serves 64 concurrent callers with two fsyncs, each caller after one that began after it", async () => {
    const w = watched();
    const sync = createDirectorySync(w.fsync);
    const first = sync.sync(scratch).then(() => w.events.push("first done"));
    const rest = Array.from({ length: 63 }, () =>
      sync.sync(scratch).then(() => w.events.push("rest")),
    );
    await Promise.all([first, ...rest]);
    expect(w.count()).toBe(2);
    // The first caller started fsync 1; the others arrived while it ran, so they wait for 2.
    expect(w.events.indexOf("first done")).toBeGreaterThan(w.events.indexOf("end 1"));
    expect(w.events.indexOf("rest")).toBeGreaterThan(w.events.indexOf("end 2"));
    expect(w.events.indexOf("start 2")).toBeGreaterThan(w.events.indexOf("end 1"));
  });

  it("starts a fresh fsync for a caller that comes after the others finished", async () => {
    const w = watched();
    const sync = createDirectorySync(w.fsync);
    await sync.sync(scratch);
    await sync.sync(scratch);
    expect(w.count()).toBe(2);
  });

  it("rejects every caller sharing a failed fsync, and recovers for the next one", async () => {
    const missing = join(scratch, "missing");
    const sync = createDirectorySync();
    const results = await Promise.allSettled([sync.sync(missing), sync.sync(missing)]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/ENOENT/);
    await expect(sync.sync(scratch)).resolves.toBeUndefined();
  });
});
