import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, lstatSync, readdirSync, readlinkSync, renameSync, unlinkSync } from "node:fs";
import {
  chmod,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  truncate,
  utimes,
  writeFile,
} from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { expectListRunsPagesEveryRunOnce } from "../../../test/support/list-runs-paging.js";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import { bytesBody, readAllBytes } from "./body.js";
import { describeBackendContract } from "./contract.js";
import { createFilesystemBackend } from "./filesystem.js";
import { maxKeySegments } from "./object-key.js";

describeBackendContract(
  "filesystem",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-fs-contract-"));
    return {
      backend: createFilesystemBackend({ root: join(dir, "root") }),
      cleanup: () => rm(dir, { recursive: true, force: true }),
    };
  },
  { localFiles: true },
);

describeBackendContract(
  "filesystem without fsync",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-fs-contract-"));
    return {
      backend: createFilesystemBackend({ root: join(dir, "root"), fsync: false }),
      cleanup: () => rm(dir, { recursive: true, force: true }),
    };
  },
  { localFiles: true },
);

/** Takes chunks (copied) from a read until at least `bytes` came; throws if it ends first. */
async function readAtLeast(it: AsyncIterator<Uint8Array>, bytes: number): Promise<Uint8Array[]> {
  const got: Uint8Array[] = [];
  for (let total = 0; total < bytes; ) {
    const step = await it.next();
    if (step.done === true) throw new Error("ended early");
    got.push(Buffer.from(step.value));
    total += step.value.byteLength;
  }
  return got;
}
describe("filesystem backend", () => {
  const scratch = scratchDir("spillway-fs-");
  let serial = 0;

  function fresh() {
    serial++;
    const base = join(scratch, `case-${serial}`);
    return { base, backend: createFilesystemBackend({ root: join(base, "root") }) };
  }

  it("lets ListRuns page through every run once", async () => {
    const { backend } = fresh();
    await expectListRunsPagesEveryRunOnce(backend);
    await backend.close();
  });

  it("creates its root 0700 and tightens an existing root to 0700", async () => {
    const { backend } = fresh();
    expect((await stat(backend.root)).mode & 0o777).toBe(0o700);
    const loose = join(scratch, "loose");
    await mkdir(loose, { mode: 0o755 });
    await chmod(loose, 0o755);
    createFilesystemBackend({ root: loose });
    expect((await stat(loose)).mode & 0o777).toBe(0o700);
  });

  it("stores every byte of a long put: overlapping chunk writes, small chunks, writeback", async () => {
    const { backend } = fresh();
    // ~72 MiB, each chunk a different fill: 1 MiB chunks (two written at once, each at its own
    // offset), every tenth a small one written at once in between, fdatasyncs on the way.
    const chunks = Array.from({ length: 80 }, (_, i) =>
      Buffer.alloc(i % 10 === 9 ? 1000 : 1024 * 1024, i),
    );
    const want = createHash("sha256");
    for (const chunk of chunks) want.update(chunk);
    async function* body() {
      yield* chunks;
    }
    const put = await backend.put("big/object", body());
    expect(put.size).toBe(72 * 1024 * 1024 + 8 * 1000);
    const got = createHash("sha256");
    for await (const chunk of await backend.get("big/object")) got.update(chunk);
    expect(got.digest("hex")).toBe(want.digest("hex"));
  });

  it("reports a removed or replaced root without its path, which stays in the cause for logs", async () => {
    const { backend } = fresh();
    await backend.put("t/x/kept", bytesBody(text("kept")));
    await rm(backend.root, { recursive: true });
    const failures = [
      await failureOf(backend.get("t/x/kept")),
      await failureOf(backend.list("t/")),
      await failureOf((backend.probe as NonNullable<typeof backend.probe>)()),
    ];
    await writeFile(backend.root, "not a directory");
    failures.push(await failureOf((backend.probe as NonNullable<typeof backend.probe>)()));
    for (const err of failures) {
      expect(err.code).toBe(Code.FailedPrecondition);
      expect(err.rawMessage).toMatch(/^the data root is (missing|no longer a directory)$/);
      expect(err.rawMessage).not.toContain(backend.root);
      expect(String((err.cause as Error | undefined)?.message)).toContain(backend.root);
    }
  });

  it("creates directories 0700 and files 0600", async () => {
    const { backend } = fresh();
    await backend.put("a/b", bytesBody(text("x")));
    expect((await stat(join(backend.root, "a"))).mode & 0o777).toBe(0o700);
    expect((await stat(join(backend.root, "a", "b"))).mode & 0o777).toBe(0o600);
  });

  it("never leaves temp files after success, failure, abort or a refused duplicate", async () => {
    const { backend } = fresh();
    await backend.put("t/x/ok", bytesBody(text("ok")));
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield text("partial");
      throw new Error("producer failed");
    }
    expect(await codeOf(backend.put("t/x/failed", failing()))).toBe(Code.Internal);
    const controller = new AbortController();
    async function* aborting(): AsyncGenerator<Uint8Array> {
      yield text("partial");
      controller.abort();
      yield text("more");
    }
    expect(
      await codeOf(backend.put("t/x/aborted", aborting(), { signal: controller.signal })),
    ).toBe(Code.Canceled);
    expect(await codeOf(backend.put("t/x/ok", bytesBody(text("again"))))).toBe(Code.AlreadyExists);
    expect(await walk(backend.root)).toEqual(["t/x/ok"]);
  });

  it("stores a key at the matching path under the root", async () => {
    const { backend } = fresh();
    await backend.put("t/ten%2Eant/r/run/b/call.stdout/up1", bytesBody(text("payload")));
    const onDisk = await readFile(
      join(backend.root, "t", "ten%2Eant", "r", "run", "b", "call.stdout", "up1"),
    );
    expect(onDisk.toString()).toBe("payload");
  });

  describe("refuses keys that could escape the root", () => {
    const bad = [
      "../x",
      "a/../../x",
      "a/./b",
      ".",
      "/etc/passwd",
      "a\\..\\b",
      "a/b\0c",
      "",
      "a//b",
      "a/",
      "a/.tmp-x",
    ];
    for (const key of bad) {
      it(`refuses ${JSON.stringify(key)} with INVALID_ARGUMENT on every call`, async () => {
        const { backend, base } = fresh();
        expect(await codeOf(backend.put(key, bytesBody(text("x"))))).toBe(Code.InvalidArgument);
        expect(await codeOf(backend.get(key))).toBe(Code.InvalidArgument);
        expect(await codeOf(backend.head(key))).toBe(Code.InvalidArgument);
        expect(await codeOf(backend.delete(key))).toBe(Code.InvalidArgument);
        expect(await readdir(base)).toEqual(["root"]);
        expect(await walk(backend.root)).toEqual([]);
      });
    }

    it("refuses list prefixes with bad directory segments", async () => {
      const { backend } = fresh();
      for (const prefix of ["../", "/abs/", "a/../", "a\\b/"]) {
        expect(await codeOf(backend.list(prefix))).toBe(Code.InvalidArgument);
      }
    });
  });

  describe("symlinks under the root", () => {
    async function planted() {
      const { backend, base } = fresh();
      const outside = join(base, "outside");
      await mkdir(outside);
      await writeFile(join(outside, "secret"), "top secret");
      await mkdir(backend.root, { recursive: true });
      await symlink(outside, join(backend.root, "t"));
      return { backend, outside };
    }

    it("put through a symlinked directory fails and writes nothing outside", async () => {
      const { backend, outside } = await planted();
      const code = await codeOf(backend.put("t/x/y", bytesBody(text("escape"))));
      expect([Code.FailedPrecondition, Code.PermissionDenied]).toContain(code);
      expect(await codeOf(backend.put("t/new", bytesBody(text("escape"))))).toBe(
        Code.FailedPrecondition,
      );
      expect(await readdir(outside)).toEqual(["secret"]);
    });

    it("get, head and delete through a symlinked directory fail without touching the file", async () => {
      const { backend, outside } = await planted();
      expect(await codeOf(backend.get("t/secret"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.openLocal("t/secret"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.head("t/secret"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.delete("t/secret"))).toBe(Code.FailedPrecondition);
      expect(await readFile(join(outside, "secret"), "utf8")).toBe("top secret");
    });

    it("list fails rather than follow a symlink, whether named by the prefix or met on the walk", async () => {
      const { backend } = await planted();
      expect(await codeOf(backend.list("t/"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.list(""))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.list("t"))).toBe(Code.FailedPrecondition);
    });

    it("refuses a directory swapped for a symlink after use, once the second it was trusted has passed", async () => {
      const { backend, base } = fresh();
      const outside = join(base, "outside-later");
      await mkdir(outside);
      await backend.put("t/run/a", bytesBody(text("inside")));
      await rm(join(backend.root, "t", "run"), { recursive: true });
      await symlink(outside, join(backend.root, "t", "run"));
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect(await codeOf(backend.put("t/run/b", bytesBody(text("escape"))))).toBe(
        Code.FailedPrecondition,
      );
      expect(await readdir(outside)).toEqual([]);
    });

    it("a directory swapped for a symlink right after use is never followed: read, head, write, delete, list", async () => {
      const { backend, base } = fresh();
      const outside = join(base, "outside-now");
      await mkdir(outside);
      await writeFile(join(outside, "a"), "outside secret");
      await backend.put("t/run/a", bytesBody(text("inside")));
      expect(await readAllBytes(await backend.get("t/run/a"))).toEqual(text("inside"));
      // No wait: the swap lands while any earlier check would still be trusted.
      await rm(join(backend.root, "t", "run"), { recursive: true });
      await symlink(outside, join(backend.root, "t", "run"));
      expect(await codeOf(backend.get("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.get("t/run/a", { offset: 1 }))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.openLocal("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.head("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.put("t/run/b", bytesBody(text("escape"))))).toBe(
        Code.FailedPrecondition,
      );
      expect(await codeOf(backend.delete("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.list("t/run/"))).toBe(Code.FailedPrecondition);
      expect(await readdir(outside)).toEqual(["a"]);
      expect(await readFile(join(outside, "a"), "utf8")).toBe("outside secret");
    });

    it("a file swapped for a symlink right after it was read is never followed", async () => {
      const { backend, base } = fresh();
      const outside = join(base, "outside-file");
      await mkdir(outside);
      await writeFile(join(outside, "secret"), "outside secret");
      await backend.put("t/run/a", bytesBody(text("inside")));
      expect(await readAllBytes(await backend.get("t/run/a"))).toEqual(text("inside"));
      await rm(join(backend.root, "t", "run", "a"));
      await symlink(join(outside, "secret"), join(backend.root, "t", "run", "a"));
      expect(await codeOf(backend.get("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.openLocal("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.head("t/run/a"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.put("t/run/a", bytesBody(text("x"))))).toBe(
        Code.FailedPrecondition,
      );
      expect(await readFile(join(outside, "secret"), "utf8")).toBe("outside secret");
    });

    it("while another process swaps a directory and a symlink back and forth, no byte from outside is served and nothing is written outside", async () => {
      const { base } = fresh();
      // Without fsync only to keep the test short: every check is the same.
      const backend = createFilesystemBackend({ root: join(base, "root"), fsync: false });
      const outside = join(base, "outside-race");
      await mkdir(outside);
      await writeFile(join(outside, "a"), "outside secret");
      await backend.put("t/run/a", bytesBody(text("inside")));
      const run = join(backend.root, "t", "run");
      // A separate process swaps as fast as it can, so swaps land between any two syscalls.
      const swapper = spawn(
        process.execPath,
        [
          "-e",
          `const fs = require("node:fs");
           const [run, outside] = process.argv.slice(1);
           for (let swaps = 0; ; swaps++) {
             if (swaps === 1) process.stdout.write("swapping\\n");
             try {
               fs.renameSync(run, run + ".real");
               fs.symlinkSync(outside, run);
               fs.unlinkSync(run);
               fs.renameSync(run + ".real", run);
             } catch {
               // The backend may create the directory while it is away: move that aside.
               try { fs.renameSync(run, run + ".aside-" + Math.random()); } catch {}
               try { fs.renameSync(run + ".real", run); } catch {}
             }
           }`,
          run,
          outside,
        ],
        { stdio: ["ignore", "pipe", "ignore"] },
      );
      await once(swapper.stdout, "data");
      const outcomes = new Map<string, number>();
      const note = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
      try {
        for (let i = 0; i < 500; i++) {
          try {
            const bytes = await readAllBytes(await backend.get("t/run/a"));
            note(Buffer.from(bytes).toString());
          } catch (err) {
            note(`get ${Code[ConnectError.from(err).code]}`);
          }
          try {
            await backend.put(`t/run/w${i}`, bytesBody(text("written")));
            note("put ok");
          } catch (err) {
            note(`put ${Code[ConnectError.from(err).code]}`);
          }
        }
      } finally {
        const exited = once(swapper, "exit");
        // Still swapping at the end, or the loop above proved less than it says.
        expect(swapper.exitCode).toBeNull();
        swapper.kill("SIGKILL");
        await exited;
      }
      expect(outcomes.get("outside secret")).toBeUndefined();
      // The swaps did land between the backend's steps; how many reads slipped in between two
      // swaps depends on scheduling (0 to 25 of 500 here), so it is checked once they stop.
      expect(outcomes.get("get FailedPrecondition")).toBeGreaterThan(0);
      expect(await readdir(outside)).toEqual(["a"]);
      // The swapper was killed at any step: put the real directory back.
      if (lstatSync(run, { throwIfNoEntry: false })?.isSymbolicLink() === true) unlinkSync(run);
      if (existsSync(`${run}.real`)) {
        if (existsSync(run)) renameSync(run, `${run}.aside-end`);
        renameSync(`${run}.real`, run);
      }
      expect(Buffer.from(await readAllBytes(await backend.get("t/run/a"))).toString()).toBe(
        "inside",
      );
      for (const what of outcomes.keys()) {
        expect([
          "inside",
          "put ok",
          "get FailedPrecondition",
          "get NotFound",
          "put FailedPrecondition",
          "put NotFound",
        ]).toContain(what);
      }
    });

    it("list with onRefused pages past symlinks and special files, reporting each once", async () => {
      const { backend, base } = fresh();
      const outside = join(base, "outside-list");
      await mkdir(outside);
      for (const key of ["a/1", "a/2", "b/1", "c/1", "c/2", "e/1"]) {
        await backend.put(key, bytesBody(text(key)));
      }
      await symlink(outside, join(backend.root, "aa"));
      await symlink(join(outside, "x"), join(backend.root, "c", "15"));
      execFileSync("mkfifo", [join(backend.root, "d")]);
      const keys: string[] = [];
      const refused: string[] = [];
      for (let startAfter: string | undefined; ; ) {
        const page = await backend.list("", {
          limit: 2,
          ...(startAfter === undefined ? {} : { startAfter }),
          onRefused: (key, reason) => {
            expect(reason.code).toBe(Code.FailedPrecondition);
            refused.push(key);
          },
        });
        keys.push(...page.keys);
        if (!page.truncated) break;
        startAfter = page.keys.at(-1);
      }
      expect(keys).toEqual(["a/1", "a/2", "b/1", "c/1", "c/2", "e/1"]);
      expect(refused).toEqual(["aa", "c/15", "d"]);
      expect(await codeOf(backend.list(""))).toBe(Code.FailedPrecondition);
    });

    it("a FIFO or a socket in place of an object is refused at once, never waited on", async () => {
      const { backend } = fresh();
      await backend.put("a/keep", bytesBody(text("kept")));
      execFileSync("mkfifo", [join(backend.root, "a", "fifo")]);
      const server = createServer();
      await new Promise<void>((done) => server.listen(join(backend.root, "a", "socket"), done));
      try {
        for (const key of ["a/fifo", "a/socket"]) {
          for (const read of [
            () => backend.get(key),
            () => backend.get(key, { offset: 0, length: 10 }),
            () => backend.get(key, { offset: 0, length: 1024 * 1024 }),
            () => backend.head(key),
          ]) {
            const err = await read().then(
              () => undefined,
              (e: unknown) => ConnectError.from(e),
            );
            expect([key, err?.code, err?.message]).toEqual([
              key,
              Code.FailedPrecondition,
              expect.stringContaining("neither a file nor a directory"),
            ]);
          }
          const put = await backend.put(key, bytesBody(text("x"))).catch(ConnectError.from);
          expect([put instanceof ConnectError && put.code, String(put)]).toEqual([
            Code.FailedPrecondition,
            expect.stringContaining("neither a file nor a directory"),
          ]);
          // Removing the name follows nothing: a delete takes it away.
          await backend.delete(key);
          expect(existsSync(join(backend.root, key))).toBe(false);
        }
        expect(Buffer.from(await readAllBytes(await backend.get("a/keep"))).toString()).toBe(
          "kept",
        );
      } finally {
        server.close();
      }
    });

    it("a symlink in place of an object is neither read, overwritten nor deleted", async () => {
      const { backend, outside } = await planted();
      await mkdir(join(backend.root, "a"));
      await symlink(join(outside, "secret"), join(backend.root, "a", "link"));
      expect(await codeOf(backend.get("a/link"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.head("a/link"))).toBe(Code.FailedPrecondition);
      expect(await codeOf(backend.put("a/link", bytesBody(text("overwrite"))))).toBe(
        Code.FailedPrecondition,
      );
      expect(await codeOf(backend.delete("a/link"))).toBe(Code.FailedPrecondition);
      expect(await readFile(join(outside, "secret"), "utf8")).toBe("top secret");
      expect(await readdir(outside)).toEqual(["secret"]);
    });
  });

  describe("bulk reads with several reads in flight", () => {
    const mib = 1024 * 1024;

    it("reads from page-aligned file positions after the first chunk, whatever the offset", async () => {
      // A chunk starts a cache line into its memory; a read at a file position that agrees
      // with that in its low 12 bits makes the kernel's copy several times slower
      // (chunk-pool.ts), so only the first read may start anywhere.
      const { backend } = fresh();
      const payload = new Uint8Array(randomBytes(3 * mib));
      await backend.put("t/run/aligned", bytesBody(payload));
      for (const offset of [64, 4_097, 100_000]) {
        const ends: number[] = [];
        const got: Uint8Array[] = [];
        let at = offset;
        for await (const chunk of await backend.get("t/run/aligned", { offset })) {
          got.push(Buffer.from(chunk));
          at += chunk.byteLength;
          ends.push(at);
        }
        expect(Buffer.concat(got).equals(Buffer.from(payload.subarray(offset)))).toBe(true);
        expect(ends.slice(0, -1).filter((end) => end % 4096 !== 0)).toEqual([]);
        expect(Math.max(...got.map((chunk) => chunk.byteLength))).toBe(mib);
      }
      await backend.close();
    });

    it("ends at a file cut short mid-read with every byte before the cut, in order", async () => {
      const { backend } = fresh();
      const payload = new Uint8Array(randomBytes(9 * mib));
      await backend.put("t/run/cut", bytesBody(payload));
      const it = (await backend.get("t/run/cut"))[Symbol.asyncIterator]();
      // Reads grow 64 KiB, 128, 256, 512, then whole chunks, four in flight.
      const got = await readAtLeast(it, 2 * mib);
      const cut = 3 * mib + 12_345;
      await truncate(join(backend.root, "t", "run", "cut"), cut);
      for (let step = await it.next(); step.done !== true; step = await it.next()) {
        got.push(Buffer.from(step.value));
      }
      const read = Buffer.concat(got);
      // Reads that finished before the cut may have brought bytes past it, never a gap.
      expect(read.byteLength).toBeGreaterThanOrEqual(cut);
      expect(read.equals(Buffer.from(payload.subarray(0, read.byteLength)))).toBe(true);
      await backend.close();
    });

    it("reads ahead at most 16 chunks for all its streams together, and on demand beyond", async () => {
      const { backend } = fresh();
      const payload = new Uint8Array(randomBytes(12 * mib));
      await backend.put("t/run/shared", bytesBody(payload));
      // Eight readers take 2 MiB each (so their reads are whole chunks) and then stop.
      const readers = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const it = (await backend.get("t/run/shared"))[Symbol.asyncIterator]();
          return { it, got: await readAtLeast(it, 2 * mib) };
        }),
      );
      // Alone, each would have read four chunks ahead.
      expect(backend.reads().ahead).toBe(16);
      // One reader goes on to the end, its later reads made as it asks for them.
      const [first, ...rest] = readers;
      if (first === undefined) throw new Error("no reader");
      for (let step = await first.it.next(); step.done !== true; step = await first.it.next()) {
        first.got.push(Buffer.from(step.value));
      }
      expect(Buffer.concat(first.got).equals(Buffer.from(payload))).toBe(true);
      for (const reader of rest) await reader.it.return?.(undefined);
      expect(backend.reads().ahead).toBe(0);
      await backend.close();
    });

    it("leaves no unhandled rejection when its call is aborted while the reader is slow", async () => {
      const { backend } = fresh();
      await backend.put("t/run/slow", bytesBody(new Uint8Array(randomBytes(6 * mib))));
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on("unhandledRejection", onUnhandled);
      try {
        const controller = new AbortController();
        const it = (await backend.get("t/run/slow", { signal: controller.signal }))[
          Symbol.asyncIterator
        ]();
        await it.next();
        controller.abort(new ConnectError("cancelled", Code.Canceled));
        // Each next() queues reads, which now fail at once; the reader dawdles between chunks.
        const failure = await (async () => {
          for (;;) {
            const step = await it.next();
            if (step.done === true) return undefined;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        })().catch((err: unknown) => err);
        expect(ConnectError.from(failure).code).toBe(Code.Canceled);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(unhandled).toEqual([]);
      } finally {
        process.off("unhandledRejection", onUnhandled);
        await backend.close();
      }
    });
  });

  describe("descriptors kept between small reads", () => {
    /** The files under root this process holds open, as the kernel names them. */
    function openUnder(root: string): string[] {
      return readdirSync("/proc/self/fd").flatMap((fd) => {
        try {
          const target = readlinkSync(`/proc/self/fd/${fd}`);
          return target.startsWith(`${root}/`) ? [target] : [];
        } catch {
          return [];
        }
      });
    }

    it("reads a file renamed over a kept one afresh", async () => {
      const { backend } = fresh();
      await backend.put("t/run/a", bytesBody(text("first")));
      expect(await readAllBytes(await backend.get("t/run/a"))).toEqual(text("first"));
      const path = join(backend.root, "t", "run", "a");
      await writeFile(`${path}.new`, "second, longer");
      renameSync(`${path}.new`, path);
      expect(await readAllBytes(await backend.get("t/run/a"))).toEqual(text("second, longer"));
      await backend.close();
    });

    it("reports a kept file deleted by another process as missing", async () => {
      const { backend } = fresh();
      await backend.put("t/run/a", bytesBody(text("gone soon")));
      await readAllBytes(await backend.get("t/run/a"));
      unlinkSync(join(backend.root, "t", "run", "a"));
      expect(await codeOf(backend.get("t/run/a"))).toBe(Code.NotFound);
      await backend.close();
    });

    it("closes a file it deletes, and one deleted by another process once idle", async () => {
      const base = join(scratch, `case-idle-${++serial}`);
      const backend = createFilesystemBackend({
        root: join(base, "root"),
        openFiles: { maxFiles: 8, idleMs: 50 },
      });
      await backend.put("t/run/a", bytesBody(text("a")));
      await backend.put("t/run/b", bytesBody(text("b")));
      await readAllBytes(await backend.get("t/run/a"));
      await readAllBytes(await backend.get("t/run/b"));
      expect(openUnder(backend.root)).toHaveLength(2);
      await backend.delete("t/run/a");
      expect(openUnder(backend.root)).toEqual([join(backend.root, "t", "run", "b")]);
      unlinkSync(join(backend.root, "t", "run", "b"));
      await new Promise((r) => setTimeout(r, 200));
      expect(openUnder(backend.root)).toEqual([]);
      await backend.close();
    });

    it("reads every name of one file through one descriptor, and a name relinked afresh", async () => {
      const { backend } = fresh();
      const names = ["t/run/a", "t/run/b", "t/run/c"];
      await backend.putMany(names, bytesBody(text("one file, three names")));
      for (const name of names) {
        expect(await readAllBytes(await backend.get(name))).toEqual(text("one file, three names"));
      }
      expect(openUnder(backend.root)).toHaveLength(1);
      const b = join(backend.root, "t", "run", "b");
      await writeFile(`${b}.new`, "b alone now");
      renameSync(`${b}.new`, b);
      expect(await readAllBytes(await backend.get("t/run/b"))).toEqual(text("b alone now"));
      expect(await readAllBytes(await backend.get("t/run/c"))).toEqual(
        text("one file, three names"),
      );
      await backend.delete("t/run/a");
      expect(await readAllBytes(await backend.get("t/run/c"))).toEqual(
        text("one file, three names"),
      );
      await backend.close();
    });

    it("refuses a symlink planted at a name of a kept file", async () => {
      const { backend } = fresh();
      await backend.putMany(["t/run/a", "t/run/b"], bytesBody(text("kept")));
      expect(await readAllBytes(await backend.get("t/run/a"))).toEqual(text("kept"));
      const b = join(backend.root, "t", "run", "b");
      unlinkSync(b);
      await symlink(join(backend.root, "t", "run", "a"), b);
      expect(await codeOf(backend.get("t/run/b"))).toBe(Code.FailedPrecondition);
      await backend.close();
    });

    it("keeps at most maxFiles open, and none after close", async () => {
      const base = join(scratch, `case-bound-${++serial}`);
      const backend = createFilesystemBackend({
        root: join(base, "root"),
        openFiles: { maxFiles: 4, idleMs: 60_000 },
      });
      for (let i = 0; i < 10; i++) {
        await backend.put(`t/run/f${i}`, bytesBody(text(`file ${i}`)));
        expect(await readAllBytes(await backend.get(`t/run/f${i}`))).toEqual(text(`file ${i}`));
      }
      expect(openUnder(backend.root)).toHaveLength(4);
      for (let i = 0; i < 10; i++) {
        expect(await readAllBytes(await backend.get(`t/run/f${i}`))).toEqual(text(`file ${i}`));
      }
      await backend.close();
      expect(openUnder(backend.root)).toEqual([]);
    });
  });

  it("stores a segment longer than 200 bytes under ~sha256 and round-trips it", async () => {
    const { backend } = fresh();
    const long = "s".repeat(300);
    const key = `t/x/${long}/obj`;
    await backend.put(key, bytesBody(text("long")));
    expect(await readAllBytes(await backend.get(key))).toEqual(text("long"));
    expect((await backend.head(key))?.size).toBe(4);
    const hashed = `~${createHash("sha256").update(long).digest("hex")}`;
    expect(await readdir(join(backend.root, "t", "x"))).toEqual([hashed]);
    const listed = (await backend.list("t/x/")).keys;
    expect(listed).toEqual([`t/x/${hashed}/obj`]);
    expect(await readAllBytes(await backend.get(`t/x/${hashed}/obj`))).toEqual(text("long"));
    await backend.delete(key);
    expect(await backend.head(key)).toBeUndefined();
  });

  it("treats a directory as no object and refuses to store a key below an object", async () => {
    const { backend } = fresh();
    await backend.put("a/b/c", bytesBody(text("c")));
    expect(await codeOf(backend.get("a/b"))).toBe(Code.NotFound);
    expect(await backend.head("a/b")).toBeUndefined();
    expect(await codeOf(backend.put("a/b", bytesBody(text("x"))))).toBe(Code.FailedPrecondition);
    expect(await codeOf(backend.put("a/b/c/d", bytesBody(text("x"))))).toBe(
      Code.FailedPrecondition,
    );
    expect(await codeOf(backend.get("a/b/c/d"))).toBe(Code.NotFound);
    await backend.delete("a/b");
    expect(await readAllBytes(await backend.get("a/b/c"))).toEqual(text("c"));
  });

  it("delete removes the directories it empties, and no others", async () => {
    const { backend } = fresh();
    await backend.put("t/x/r/run/b/call/up", bytesBody(text("1")));
    await backend.put("t/x/r/keep/b/call/up", bytesBody(text("2")));
    await backend.delete("t/x/r/run/b/call/up");
    expect(await readdir(join(backend.root, "t", "x", "r"))).toEqual(["keep"]);
    await backend.delete("t/x/r/keep/b/call/up");
    expect(await readdir(backend.root)).toEqual([]);
    expect((await stat(backend.root)).isDirectory()).toBe(true);
  });

  it("list never shows temp files", async () => {
    const { backend } = fresh();
    await backend.put("a/obj", bytesBody(text("x")));
    await writeFile(join(backend.root, "a", ".tmp-leftover"), "partial");
    expect((await backend.list("a/")).keys).toEqual(["a/obj"]);
    expect((await backend.list("")).keys).toEqual(["a/obj"]);
  });

  it("list and the sweep refuse a nest deeper than any key instead of holding a descriptor per level", async () => {
    const { backend } = fresh();
    await backend.put("a/obj", bytesBody(text("kept")));
    const deepest = Array.from({ length: maxKeySegments }, (_, i) => `s${i}`).join("/");
    await backend.put(deepest, bytesBody(text("deepest key")));
    expect(await codeOf(backend.put(`${deepest}/more`, bytesBody(text("x"))))).toBe(
      Code.InvalidArgument,
    );
    // A nest planted under the root, far deeper than keys go, with a file and an old temp
    // file at the bottom.
    const nest = join(backend.root, "n", ...Array.from({ length: 300 }, () => "d"));
    await mkdir(nest, { recursive: true });
    await writeFile(join(nest, "leaf"), "deep");
    await writeFile(join(nest, ".tmp-old"), "partial");
    const hourAgo = new Date(Date.now() - 3_600_000);
    await utimes(join(nest, ".tmp-old"), hourAgo, hourAgo);
    const refused: string[] = [];
    const page = await backend.list("", {
      limit: 1000,
      onRefused: (key, reason) => {
        expect(reason.code).toBe(Code.FailedPrecondition);
        refused.push(key);
      },
    });
    expect(page.keys).toEqual(["a/obj", deepest]);
    expect(refused).toEqual([
      ["n", ...Array.from({ length: maxKeySegments - 1 }, () => "d")].join("/"),
    ]);
    expect(await codeOf(backend.list(""))).toBe(Code.FailedPrecondition);
    expect(await backend.sweepLeftovers(60_000)).toBe(0);
    expect(existsSync(join(nest, ".tmp-old"))).toBe(true);
  });

  it("never sweeps a temp file it is writing, and a temp removed by another process is UNAVAILABLE", async () => {
    const { backend } = fresh();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started: () => void = () => {};
    const begun = new Promise<void>((resolve) => {
      started = resolve;
    });
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield text("first half, ");
      started();
      await held;
      yield text("second half");
    }
    const writing = backend.put("t/r/up", slow());
    await begun;
    const [temp] = (await walk(backend.root, true)).filter((path) => path.includes(".tmp"));
    expect(temp).toBeDefined();
    // As after the clock stepped forward: the file's time is far in the past.
    const longAgo = new Date(Date.now() - 24 * 3_600_000);
    await utimes(join(backend.root, temp as string), longAgo, longAgo);
    expect(await backend.sweepTempFiles(60_000)).toBe(0);
    release();
    await writing;
    expect(Buffer.from(await readAllBytes(await backend.get("t/r/up"))).toString()).toBe(
      "first half, second half",
    );

    // Another process's sweep removes a temp this one is still writing: a retry can succeed.
    let gone: () => void = () => {};
    const removed = new Promise<void>((resolve) => {
      gone = resolve;
    });
    async function* removedMidway(): AsyncGenerator<Uint8Array> {
      yield text("bytes");
      for (const path of await walk(backend.root, true)) {
        if (path.includes(".tmp")) await rm(join(backend.root, path));
      }
      gone();
    }
    const lost = backend.put("t/r/lost", removedMidway());
    await removed;
    const failure = await failureOf(lost);
    expect(failure.code).toBe(Code.Unavailable);
    expect(failure.rawMessage).toMatch(
      /^the upload's temporary file was removed before it was stored/,
    );
  });

  it("closes the file of a read ended before its first chunk, at once", async () => {
    const { backend } = fresh();
    // Large enough to be read through a kept-open handle, not the small synchronous path.
    await backend.put("t/r/big", bytesBody(new Uint8Array(randomBytes(4 << 20))));
    const path = join(backend.root, "t", "r", "big");
    const openOnIt = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === path;
        } catch {
          return false;
        }
      }).length;
    for (const end of ["return", "throw"] as const) {
      const reader = (await backend.get("t/r/big"))[Symbol.asyncIterator]();
      expect(openOnIt(), end).toBe(1);
      if (end === "return") await reader.return?.(undefined);
      else await reader.throw?.(new Error("the call was cancelled")).catch(() => undefined);
      expect(openOnIt(), end).toBe(0);
    }
  });

  it("leaves no directory behind a failed upload, and sweeps old empty ones", async () => {
    const { backend } = fresh();
    await backend.put("t/dev/r/run/b/kept/up1", bytesBody(text("kept")));
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield text("partial");
      throw new Error("the client went away");
    }
    expect(await codeOf(backend.put("t/dev/r/run/b/cut/up1", failing()))).toBe(Code.Internal);
    expect(await codeOf(backend.put("t/dev/r/gone/b/cut/up1", failing()))).toBe(Code.Internal);
    expect(existsSync(join(backend.root, "t/dev/r/run/b/cut"))).toBe(false);
    expect(existsSync(join(backend.root, "t/dev/r/gone"))).toBe(false);
    expect(existsSync(join(backend.root, "t/dev/r/run/b/kept/up1"))).toBe(true);

    // Skeletons an older server left: the old ones go, a fresh one and a full one stay.
    const old = join(backend.root, "t/dev/r/old/b/call");
    const young = join(backend.root, "t/dev/r/young/b/call");
    // The root's own entries are not the sweep's: a data directory that is its file system's
    // root holds lost+found.
    const lostFound = join(backend.root, "lost+found");
    await mkdir(old, { recursive: true });
    await mkdir(young, { recursive: true });
    await mkdir(lostFound);
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const dir of [old, dirname(old), dirname(dirname(old)), lostFound])
      await utimes(dir, hourAgo, hourAgo);
    await backend.sweepTempFiles(60_000);
    expect(existsSync(join(backend.root, "t/dev/r/old"))).toBe(false);
    expect(existsSync(young)).toBe(true);
    expect(existsSync(lostFound)).toBe(true);
    expect(existsSync(join(backend.root, "t/dev/r/run/b/kept/up1"))).toBe(true);
  });

  it("stores every put while failed uploads beside it prune the directories they made", async () => {
    const { backend } = fresh();
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield text("partial");
      throw new Error("the client went away");
    }
    // Each round a run's directories are new: failed puts remove them as they fail while the
    // good puts beside them make their own below (the race took 1 in ~2,600 CI offloads).
    const failures: string[] = [];
    for (let round = 0; round < 40; round++) {
      await Promise.all(
        Array.from({ length: 16 }, async (_, i) => {
          const run = `t/dev/r/run${round}/b`;
          await backend.put(`${run}/cut${i}/up`, failing()).catch(() => {});
          await backend
            .put(`${run}/ok${i}/up`, bytesBody(text(`${round}.${i}`)))
            .catch((err: unknown) => failures.push(`${round}.${i}: ${String(err)}`));
        }),
      );
    }
    expect(failures).toEqual([]);
    expect((await backend.list("t/dev/r/", { limit: 1000 })).keys).toHaveLength(640);
  });

  it("sweepTempFiles removes temp files older than the age and nothing else", async () => {
    const { backend } = fresh();
    await backend.put("a/b/obj", bytesBody(text("keep me")));
    const old = join(backend.root, "a", "b", ".tmp-old");
    const oldTop = join(backend.root, ".tmp-old-top");
    const recent = join(backend.root, "a", ".tmp-recent");
    const oldObject = join(backend.root, "a", "b", "obj");
    for (const path of [old, oldTop, recent]) await writeFile(path, "partial");
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const path of [old, oldTop, oldObject]) await utimes(path, hourAgo, hourAgo);
    expect(await backend.sweepTempFiles(60_000)).toBe(2);
    expect((await walk(backend.root, true)).sort()).toEqual(["a/.tmp-recent", "a/b/obj"]);
    expect(await backend.sweepTempFiles(60_000)).toBe(0);
    expect(await codeOf(backend.sweepTempFiles(-1))).toBe(Code.InvalidArgument);
  });
});

function text(value: string): Uint8Array {
  return new TextEncoder().encode(value);
}

/** The ConnectError `pending` (and the body it resolves to, if any) fails with. */
async function failureOf(pending: Promise<unknown>): Promise<ConnectError> {
  try {
    const value = await pending;
    if (typeof value === "object" && value !== null && Symbol.asyncIterator in value) {
      for await (const _ of value as AsyncIterable<unknown>);
    }
  } catch (err) {
    if (err instanceof ConnectError) return err;
    throw err;
  }
  throw new Error("expected a failure");
}

async function codeOf(pending: Promise<unknown>): Promise<Code | string> {
  try {
    await pending;
    return "ok";
  } catch (err) {
    return err instanceof ConnectError ? err.code : `not a ConnectError: ${String(err)}`;
  }
}

/** Every file under dir (relative, `/`-joined); temp files included only when asked. */
async function walk(dir: string, withTemp = false, base = ""): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const rel = `${base}${entry.name}`;
    if (entry.isDirectory())
      found.push(...(await walk(join(dir, entry.name), withTemp, `${rel}/`)));
    else if (withTemp || !entry.name.startsWith(".tmp-")) found.push(rel);
    else found.push(`TEMP:${rel}`);
  }
  return found;
}
