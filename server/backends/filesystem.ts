import { createHash, randomUUID } from "node:crypto";
import type { Dirent, Stats } from "node:fs";
import {
  chmodSync,
  closeSync,
  constants,
  fdatasync as fdatasyncCallback,
  fstatSync,
  fsync as fsyncCallback,
  linkSync,
  lstatSync,
  mkdirSync,
  open as openCallback,
  openSync,
  readSync,
  unlinkSync,
  write as writeCallback,
  writeSync,
} from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { access, lstat, mkdir, open, readdir, rmdir, unlink } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import type {
  Backend,
  BackendCallOptions,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
} from "./backend.js";
import { abortableBody, bytesBody, throwIfAborted } from "./body.js";
import { checkListLimit, checkRange, sweepCutoffMs } from "./call-options.js";
import { type ChunkPool, createChunkPool, firstReadBytes, readChunkBytes } from "./chunk-pool.js";
import { createDirectorySync } from "./directory-sync.js";
import { errnoOf, fromNodeError } from "./from-node-error.js";
import { createKnownDirectories } from "./known-directories.js";
import { alreadyExists, notFound } from "./object-errors.js";
import { checkKey, checkListPrefix, reservedSegmentPrefix as tempPrefix } from "./object-key.js";

/** Segments longer than this many UTF-8 bytes are stored under a hashed name. */
const maxSegmentBytes = 200;
/** Attempts at opening a temp file when a concurrent delete pruned its fresh directory. */
const openTempAttempts = 3;
/**
 * Objects and chunks up to this size are read and written with synchronous calls (see
 * createFilesystemBackend): from the page cache that takes microseconds, less than handing the
 * call to libuv's thread pool and back.
 */
const syncIoBytes = 64 * 1024;
/**
 * While a put streams, an fdatasync is started every time this much more has been written
 * (one at a time, on libuv's pool), so the disk writes the file as it arrives and the fsync
 * that ends the put waits only for the last stretch: for 256 MiB that final fsync had taken
 * 126-162 ms of a 1.2 s offload, with the disk idle until then (256 MiB offloads alternating
 * between two servers: medians 208/259/251 against 184/234/216 MiB/s).
 */
const writebackBytes = 32 * 1024 * 1024;
/**
 * How many chunks of one put are written at once. Two let the kernel's page-cache copy of one
 * chunk (the largest single cost of a filesystem offload) overlap with the next: 256 MiB
 * offloads alternating between two servers, medians of ten, eight rounds: higher in six,
 * about equal in two (248-376 against 242-314 MiB/s, about +9 % on average).
 */
const writesInFlight = 2;

/** A directory reached by walking a key's segments, and the ones this walk created. */
interface Walk {
  readonly dir: string;
  readonly created: readonly string[];
}

/** FilesystemBackendOptions configure createFilesystemBackend. */
export interface FilesystemBackendOptions {
  /** Directory that holds every object; created `0700` when missing. */
  readonly root: string;
  /** Whether put fsyncs the file and its directory before resolving. Default true. */
  readonly fsync?: boolean;
}

/** FilesystemBackend is a Backend over a local directory, with crash-leftover cleanup. */
export type FilesystemBackend = Backend & {
  /** Absolute path of the root directory. */
  readonly root: string;
  /** Always present here: a put is putMany under one name. */
  putMany: NonNullable<Backend["putMany"]>;
  /**
   * Deletes temp files (`.tmp-*`, left by a crash mid-put) last modified more than
   * `olderThanMs` ago, anywhere under the root, without following symlinks; returns how many.
   */
  sweepTempFiles(olderThanMs: number): Promise<number>;
  /** Same as sweepTempFiles, with a signal checked between directories. */
  sweepLeftovers(olderThanMs: number, opts?: BackendCallOptions): Promise<number>;
};

/**
 * createFilesystemBackend returns a Backend (kind `filesystem`) storing key `a/b/c` at
 * `<root>/a/b/c`.
 *
 * Guarantees, beyond the Backend contract:
 * - the root is created (recursively) and chmodded to `0700` before this returns; directories
 *   are created `0700` and files `0600`;
 * - keys and list prefixes are re-checked by the shared key rules (`object-key.ts`, which also
 *   reserves the `.tmp-` names of temp files) with `INVALID_ARGUMENT`; a segment longer than
 *   200 UTF-8 bytes is stored as `~` + sha256hex(segment), a name the service's encoded
 *   segments never take;
 * - no call follows a symlink under the root: directories are checked with lstat while walking
 *   (a directory checked less than a second ago is trusted, so bursts walk once), files are
 *   opened with `O_NOFOLLOW`, and a symlink met on the way fails the call with
 *   `FAILED_PRECONDITION` instead of touching anything outside the root;
 * - put writes a temp file beside the target (a large one with writeback started every 32 MiB,
 *   see writebackBytes), fsyncs it, publishes it create-only with a hard link, then fsyncs the
 *   directory (concurrent puts into one directory share directory fsyncs); a failed or
 *   aborted put leaves neither object nor temp file, and closes its file only once no write or
 *   fdatasync of its own is still running; a put to a taken
 *   name finds out when it publishes (as on the object stores, whose conditional writes fail
 *   at completion), so only replays pay for writing bytes that are then dropped;
 * - list returns the names found on disk, so a key with a hashed (long) segment is listed with
 *   `~<hash>` in its place (such a listed key still works with get, head and delete); callers
 *   list prefixes whose segments are short;
 * - putMany writes one temp file the same way and publishes it under each name with its own
 *   create-only hard link, then fsyncs the directories once for all names: N names cost one
 *   file, one fsync and N links; deleting a name unlinks only that name, and the bytes go with
 *   the last; put is putMany under one name;
 * - delete removes directories it leaves empty, up to the root;
 * - probe rejects with `FAILED_PRECONDITION` while the root is missing or no longer a
 *   directory (puts never recreate it) and with the node error while it cannot be written
 *   (`EROFS` on a read-only mount, `EACCES` for a user without write permission);
 * - a stream returned by get holds an open file until it is read to the end or abandoned
 *   with `break`/`return`, so callers always consume or close it.
 * Every filesystem failure is reported through `fromNodeError`.
 *
 * Lookups, opening existing files, closing, publishing the temp file, and reads and writes of
 * at most 64 KiB run synchronously on the event loop; creating files and directories, bulk
 * reads and writes, fsyncs and deletes of objects run on libuv's thread pool. On a local disk
 * a lookup answered from the kernel's caches takes a microsecond or two and a small read or
 * write a few more, where the hand-off to the pool and back costs 40-70 µs of CPU (measured
 * here): a small offload made a dozen such calls. The root belongs on a local disk: on a
 * network file system that stalls, those calls stall the process.
 */
export function createFilesystemBackend(opts: FilesystemBackendOptions): FilesystemBackend {
  const root = resolve(opts.root);
  const fsync = opts.fsync ?? true;
  const directorySync = createDirectorySync();
  // Directories verified within the last second are not walked again (see walkDirs).
  const knownDirectories = createKnownDirectories();
  // Sixteen free chunks (16 MiB) cover the read-ahead and the HTTP/2 writes in flight of
  // several concurrent reads.
  const chunks = createChunkPool(readChunkBytes, 16);
  try {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    chmodSync(root, 0o700);
  } catch (err) {
    throw fromNodeError(err);
  }

  /**
   * Walks the directories of a key from the root, refusing symlinks. When `create` is false a
   * missing directory (or a file in its place) yields undefined: no object can be below it.
   */
  function walkDirs(dirSegments: readonly string[], create: true, key: string): Promise<Walk>;
  function walkDirs(
    dirSegments: readonly string[],
    create: false,
    key: string,
  ): Promise<Walk | undefined>;
  async function walkDirs(
    dirSegments: readonly string[],
    create: boolean,
    key: string,
  ): Promise<Walk | undefined> {
    let dir = root;
    const created: string[] = [];
    for (const segment of dirSegments) {
      dir = child(dir, segment);
      if (knownDirectories.has(dir)) continue;
      let stats = lstatIfPresent(dir);
      if (stats === undefined) {
        if (!create) return undefined;
        try {
          await mkdir(dir, { mode: 0o700 });
          created.push(dir);
        } catch (err) {
          if (errnoOf(err) !== "EEXIST") throw err;
        }
        // Re-check what is there now: a concurrent writer may have created it first.
        stats = lstatSync(dir);
      }
      if (stats.isSymbolicLink()) throw symlinkRefused(key);
      if (!stats.isDirectory()) {
        if (!create) return undefined;
        throw new ConnectError(
          `a prefix of the key is an object, so the key cannot be stored (key "${key}")`,
          Code.FailedPrecondition,
        );
      }
      knownDirectories.add(dir);
    }
    return { dir, created };
  }

  async function openTemp(
    dirSegments: readonly string[],
    key: string,
  ): Promise<{ fd: number; tempPath: string; dir: string; created: readonly string[] }> {
    for (let attempt = 1; ; attempt++) {
      const walked = await walkDirs(dirSegments, true, key);
      // randomUUID draws on a buffer of random bytes that node:crypto refills in batches; a
      // randomBytes call per name went to OpenSSL every time (~12 µs per put in a profile).
      const tempPath = child(walked.dir, `${tempPrefix}${randomUUID()}`);
      try {
        // Asynchronous: creating a file can wait on the file system's journal (measured: half a
        // millisecond on ext4 while other puts fsync), and that wait must not stall the process.
        const fd = await openFd(
          tempPath,
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o600,
        );
        return { fd, tempPath, dir: walked.dir, created: walked.created };
      } catch (err) {
        // A concurrent delete may prune the directory between walking and opening; walk again.
        if (errnoOf(err) !== "ENOENT" || attempt >= openTempAttempts) throw err;
        knownDirectories.forget(walked.dir);
      }
    }
  }

  async function syncDirectories(dirs: Iterable<string>): Promise<void> {
    await Promise.all([...new Set(dirs)].map((dir) => directorySync.sync(dir)));
  }

  async function collectKeys(
    dir: string,
    keyBase: string,
    namePrefix: string,
    startAfter: string | undefined,
    out: string[],
    want: number,
    signal: AbortSignal | undefined,
    key: string,
  ): Promise<void> {
    throwIfAborted(signal);
    const items: { name: string; path: string; isDir: boolean }[] = [];
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (!entry.name.startsWith(namePrefix) || entry.name.startsWith(tempPrefix)) continue;
      if (entry.isSymbolicLink()) throw symlinkRefused(key);
      // A directory sorts as `name/`, so depth-first order is exactly ascending key order.
      if (entry.isDirectory())
        items.push({ name: entry.name, path: `${keyBase}${entry.name}/`, isDir: true });
      else if (entry.isFile())
        items.push({ name: entry.name, path: `${keyBase}${entry.name}`, isDir: false });
    }
    items.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    for (const item of items) {
      if (out.length >= want) return;
      if (item.isDir) {
        // Every key below starts with item.path; all of them are <= startAfter when it is past it.
        const skip =
          startAfter !== undefined && item.path < startAfter && !startAfter.startsWith(item.path);
        if (!skip) {
          await collectKeys(
            child(dir, item.name),
            item.path,
            "",
            startAfter,
            out,
            want,
            signal,
            key,
          );
        }
      } else if (startAfter === undefined || item.path > startAfter) {
        out.push(item.path);
      }
    }
  }

  async function sweepDirectory(
    dir: string,
    cutoffMs: number,
    signal: AbortSignal | undefined,
  ): Promise<number> {
    throwIfAborted(signal);
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      // A concurrent delete may prune a directory while the sweep walks it.
      if (errnoOf(err) === "ENOENT") return 0;
      throw err;
    }
    let removed = 0;
    for (const entry of entries) {
      const path = child(dir, entry.name);
      if (entry.isDirectory()) {
        removed += await sweepDirectory(path, cutoffMs, signal);
      } else if (entry.isFile() && entry.name.startsWith(tempPrefix)) {
        const stats = lstatIfPresent(path);
        if (stats?.isFile() === true && stats.mtimeMs < cutoffMs && (await unlinkIfPresent(path))) {
          removed++;
        }
      }
    }
    return removed;
  }

  /** Removes now-empty directories from dir up to (not including) the root, best effort. */
  async function pruneEmptyDirectories(dir: string): Promise<void> {
    for (
      let current = dir;
      current !== root && current.startsWith(root);
      current = dirname(current)
    ) {
      try {
        await rmdir(current);
        knownDirectories.forget(current);
      } catch {
        // Not empty (a sibling or an in-flight temp file) or already gone: stop pruning.
        return;
      }
    }
  }

  /**
   * Removes the file stored under key, if any, and returns the directory it was in (for
   * pruning), or undefined when there was nothing to remove.
   */
  async function unlinkKey(key: string, signal: AbortSignal | undefined) {
    const { dirSegments, name } = splitKey(key);
    try {
      throwIfAborted(signal);
      const walked = await walkDirs(dirSegments, false, key);
      if (walked === undefined) return undefined;
      const final = child(walked.dir, name);
      const stats = lstatIfPresent(final);
      if (stats === undefined || stats.isDirectory()) return undefined;
      if (stats.isSymbolicLink()) throw symlinkRefused(key);
      await unlinkIfPresent(final);
      return walked.dir;
    } catch (err) {
      throw fromNodeError(err, key);
    }
  }

  /**
   * Writes body to a new temp file in the directory of dirSegments (created as needed), fsyncs
   * and closes it. On any failure or abort the temp file is gone and the error is mapped; the
   * caller publishes the temp file under its names and then unlinks it.
   */
  async function writeTemp(
    dirSegments: readonly string[],
    key: string,
    body: AsyncIterable<Uint8Array>,
    signal: AbortSignal | undefined,
  ): Promise<{ tempPath: string; dir: string; created: readonly string[]; size: number }> {
    let fd: number | undefined;
    let tempPath: string | undefined;
    try {
      throwIfAborted(signal);
      const opened = await openTemp(dirSegments, key);
      fd = opened.fd;
      tempPath = opened.tempPath;
      // Write-behind: up to writesInFlight chunks are written (each at its own offset, on
      // libuv's pool) while the producer makes the next (copies, since a producer may reuse
      // its buffer once it is asked for more), so hashing and the disk overlap instead of
      // taking turns. Copies come from the read pool and go back to it once written. A small
      // chunk is written at once: that is cheaper than the hand-off.
      const writing: Promise<void>[] = [];
      // Each early writeback chains on the one before, so a failure is never lost.
      let writeback: Promise<void> = Promise.resolve();
      let writebackRunning = false;
      let writebackFrom = 0;
      let size = 0;
      try {
        for await (const chunk of abortableBody(body, signal)) {
          if (writing.length >= writesInFlight) await writing.shift();
          const offset = size;
          size += chunk.byteLength;
          if (chunk.byteLength <= syncIoBytes) {
            writeAllSync(fd, chunk, offset);
            continue;
          }
          const copy = chunks.take(chunk.byteLength);
          copy.set(chunk);
          const written = writeAll(fd, copy, offset).finally(() => chunks.give(copy));
          // An error surfaces when it is awaited; until then it must not count as unhandled.
          written.catch(() => undefined);
          writing.push(written);
          if (fsync && !writebackRunning && size - writebackFrom >= writebackBytes) {
            writebackRunning = true;
            writebackFrom = size;
            const target = fd;
            writeback = writeback
              .then(() => written)
              .then(() => datasyncFd(target))
              .finally(() => {
                writebackRunning = false;
              });
            writeback.catch(() => undefined);
          }
        }
        await Promise.all(writing);
        await writeback;
      } finally {
        // The descriptor must outlive every call still using it: closed under a write or an
        // fdatasync on the pool, its number could be reused by another open meanwhile.
        await Promise.allSettled([...writing, writeback]);
      }
      throwIfAborted(signal);
      if (fsync) await syncFd(fd);
      // Forgotten before closing: a close that fails has still released the descriptor,
      // whose number another open may take at once.
      const done = fd;
      fd = undefined;
      closeSync(done);
      return { tempPath, dir: opened.dir, created: opened.created, size };
    } catch (err) {
      if (fd !== undefined) closeQuietly(fd);
      if (tempPath !== undefined) await unlinkIfPresent(tempPath).catch(() => false);
      throw fromNodeError(err, key);
    }
  }

  const backend: FilesystemBackend = {
    kind: "filesystem",
    root,

    async put(key: string, body: AsyncIterable<Uint8Array>, callOpts?: BackendCallOptions) {
      const [result] = await backend.putMany([key], body, callOpts);
      if (result === undefined || result instanceof ConnectError) {
        throw result ?? new ConnectError(`put of "${key}" stored nothing`, Code.Internal);
      }
      return result;
    },

    async putMany(
      keys: readonly string[],
      body: AsyncIterable<Uint8Array>,
      callOpts?: BackendCallOptions,
    ) {
      const targets = keys.map((key) => ({ key, ...splitKey(key) }));
      const [first] = targets;
      if (first === undefined) return [];
      const written = await writeTemp(first.dirSegments, first.key, body, callOpts?.signal);
      const dirs = new Set<string>();
      const results = await Promise.all(
        targets.map(async ({ key, dirSegments, name }): Promise<ObjectInfo | ConnectError> => {
          try {
            for (let attempt = 1; ; attempt++) {
              const walked = await walkDirs(dirSegments, true, key);
              try {
                publish(written.tempPath, child(walked.dir, name), key);
              } catch (err) {
                // A concurrent delete may prune the directory between walking and linking.
                if (errnoOf(err) !== "ENOENT" || attempt >= openTempAttempts) throw err;
                knownDirectories.forget(walked.dir);
                continue;
              }
              dirs.add(walked.dir);
              for (const created of walked.created) dirs.add(dirname(created));
              return { size: written.size, modifiedMs: Date.now() };
            }
          } catch (err) {
            return fromNodeError(err, key);
          }
        }),
      );
      unlinkQuietly(written.tempPath);
      for (const created of written.created) dirs.add(dirname(created));
      try {
        if (fsync) await syncDirectories(dirs);
      } catch (err) {
        throw fromNodeError(err, first.key);
      }
      return results;
    },

    async get(key: string, getOpts?: GetOptions) {
      const signal = getOpts?.signal;
      const { dirSegments, name } = splitKey(key);
      const { offset, length } = checkRange(getOpts);
      let handle: FileHandle | undefined;
      try {
        throwIfAborted(signal);
        const walked = await walkDirs(dirSegments, false, key);
        if (walked === undefined) throw notFound(key);
        const path = child(walked.dir, name);
        // A lookup first: a missing object (every new offload asks) costs no failed open.
        const found = lstatIfPresent(path);
        if (found === undefined) throw notFound(key);
        if (found.isFile() && rangeEnd(found.size, offset, length) - offset <= syncIoBytes) {
          return readSmall(path, offset, length, key);
        }
        // O_NONBLOCK keeps a planted FIFO from hanging the open; it changes nothing for files.
        handle = await open(path, readFlags);
        const stats = await handle.stat();
        if (!stats.isFile()) throw notFound(key);
        const end = rangeEnd(stats.size, offset, length);
        const stream = readRange(handle, offset, end, signal, key, chunks);
        handle = undefined;
        return stream;
      } catch (err) {
        await handle?.close().catch(() => undefined);
        throw fromNodeError(err, key);
      }
    },

    async head(key: string, callOpts?: BackendCallOptions): Promise<ObjectInfo | undefined> {
      const signal = callOpts?.signal;
      const { dirSegments, name } = splitKey(key);
      try {
        throwIfAborted(signal);
        const walked = await walkDirs(dirSegments, false, key);
        if (walked === undefined) return undefined;
        const stats = lstatIfPresent(child(walked.dir, name));
        if (stats === undefined) return undefined;
        if (stats.isSymbolicLink()) throw symlinkRefused(key);
        return stats.isFile() ? { size: stats.size, modifiedMs: stats.mtimeMs } : undefined;
      } catch (err) {
        throw fromNodeError(err, key);
      }
    },

    async list(prefix: string, listOpts?: ListOptions): Promise<ListPage> {
      const signal = listOpts?.signal;
      const limit = checkListLimit(listOpts);
      checkListPrefix(prefix);
      const cut = prefix.lastIndexOf("/");
      const dirSegments = cut < 0 ? [] : prefix.slice(0, cut).split("/").map(diskName);
      const namePrefix = prefix.slice(cut + 1);
      try {
        throwIfAborted(signal);
        const walked = await walkDirs(dirSegments, false, prefix);
        if (walked === undefined) return { keys: [], truncated: false };
        const keys: string[] = [];
        const keyBase = dirSegments.map((s) => `${s}/`).join("");
        await collectKeys(
          walked.dir,
          keyBase,
          namePrefix,
          listOpts?.startAfter,
          keys,
          limit + 1,
          signal,
          prefix,
        );
        return { keys: keys.slice(0, limit), truncated: keys.length > limit };
      } catch (err) {
        throw fromNodeError(err, prefix);
      }
    },

    async delete(key: string, callOpts?: BackendCallOptions): Promise<void> {
      const dir = await unlinkKey(key, callOpts?.signal);
      if (dir !== undefined) await pruneEmptyDirectories(dir);
    },

    async deleteMany(keys: readonly string[], callOpts?: BackendCallOptions): Promise<void> {
      // A bad key refuses the whole batch before anything is deleted, as on the object stores.
      for (const key of keys) checkKey(key);
      // Unlinks are independent; a few at a time keeps file-descriptor use bounded. Each
      // directory is pruned once, after its files are gone, not once for every file.
      const dirs = new Set<string>();
      for (let i = 0; i < keys.length; i += 16) {
        const unlinked = await Promise.all(
          keys.slice(i, i + 16).map((key) => unlinkKey(key, callOpts?.signal)),
        );
        for (const dir of unlinked) if (dir !== undefined) dirs.add(dir);
      }
      for (const dir of dirs) await pruneEmptyDirectories(dir);
    },

    release(chunk: Uint8Array): void {
      chunks.give(chunk);
    },

    async probe(callOpts?: BackendCallOptions): Promise<void> {
      throwIfAborted(callOpts?.signal);
      // The root itself must still be a writable directory: every put walks down from it and
      // never recreates it.
      let stats: Stats;
      try {
        stats = await lstat(root);
        await access(root, constants.W_OK | constants.X_OK);
      } catch (err) {
        if (errnoOf(err) !== "ENOENT") throw fromNodeError(err);
        throw new ConnectError(`the data root ${root} is missing`, Code.FailedPrecondition);
      }
      if (!stats.isDirectory()) {
        throw new ConnectError(
          `the data root ${root} is no longer a directory`,
          Code.FailedPrecondition,
        );
      }
    },

    async close(): Promise<void> {},

    async sweepTempFiles(olderThanMs: number): Promise<number> {
      return backend.sweepLeftovers(olderThanMs);
    },

    async sweepLeftovers(olderThanMs: number, callOpts?: BackendCallOptions): Promise<number> {
      const cutoffMs = sweepCutoffMs(olderThanMs);
      try {
        throwIfAborted(callOpts?.signal);
        return await sweepDirectory(root, cutoffMs, callOpts?.signal);
      } catch (err) {
        throw fromNodeError(err);
      }
    },
  };
  return backend;
}

/** Checks a key and splits it into the on-disk names of its directories and its file. */
/**
 * The path of `name` inside `dir`, for a directory path this backend made (the resolved root or
 * a path built by this function) and a single name that is neither empty, "." nor ".." and has
 * no "/" (a checked key's segment, or a name read from a directory). Such a path is already
 * normal, so plain concatenation gives what path.join would, without its normalizing pass,
 * which allocated a string per segment and showed as the largest allocator of a small put.
 */
function child(dir: string, name: string): string {
  return dir.endsWith("/") ? `${dir}${name}` : `${dir}/${name}`;
}

function splitKey(key: string): { dirSegments: string[]; name: string } {
  const segments = checkKey(key).split("/").map(diskName);
  // A checked key has at least one segment.
  const name = segments.pop() ?? "";
  return { dirSegments: segments, name };
}

/** The on-disk name of a checked segment: itself, or a digest when too long for a file name. */
function diskName(segment: string): string {
  if (Buffer.byteLength(segment, "utf8") <= maxSegmentBytes) return segment;
  return `~${createHash("sha256").update(segment, "utf8").digest("hex")}`;
}

function symlinkRefused(key: string): ConnectError {
  return new ConnectError(
    `refusing a symlink under the storage root (key "${key}")`,
    Code.FailedPrecondition,
  );
}

function occupied(stats: Stats, key: string): ConnectError {
  if (stats.isSymbolicLink()) return symlinkRefused(key);
  if (stats.isFile()) return alreadyExists(key);
  return new ConnectError(
    `the key is a prefix of other objects, so it cannot be stored (key "${key}")`,
    Code.FailedPrecondition,
  );
}

/**
 * Links a finished temp file under its final name, create-only. What already holds the name
 * is looked at only when the link fails: a put to a free name (every new offload) makes no
 * lookup of its own.
 */
function publish(tempPath: string, target: string, key: string): void {
  try {
    linkSync(tempPath, target);
  } catch (err) {
    const existing = errnoOf(err) === "EEXIST" ? lstatIfPresent(target) : undefined;
    throw existing === undefined ? err : occupied(existing, key);
  }
}

/** The flags every read opens a file with (O_NONBLOCK: a planted FIFO must not hang the open). */
const readFlags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** lstat without the exception (and its stack trace) for a missing entry. */
function lstatIfPresent(path: string): Stats | undefined {
  return lstatSync(path, { throwIfNoEntry: false });
}

/** Where a read of `[offset, offset + length)` ends in an object of `size` bytes. */
function rangeEnd(size: number, offset: number, length: number | undefined): number {
  return length === undefined ? size : Math.min(size, offset + length);
}

/**
 * Reads a range of at most syncIoBytes (as the lookup saw it) with synchronous calls and
 * returns it as a one-chunk stream. Decisions use the opened file's own stat, so an object
 * replaced after the lookup is read as it is now (or reported missing).
 */
function readSmall(
  path: string,
  offset: number,
  length: number | undefined,
  key: string,
): AsyncIterable<Uint8Array> {
  const fd = openSync(path, readFlags);
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw notFound(key);
    const end = rangeEnd(stats.size, offset, length);
    const bytes = Buffer.allocUnsafe(Math.max(0, end - offset));
    let at = 0;
    while (at < bytes.byteLength) {
      const read = readSync(fd, bytes, at, bytes.byteLength - at, offset + at);
      if (read === 0) break;
      at += read;
    }
    return bytesBody(bytes.subarray(0, at));
  } finally {
    closeQuietly(fd);
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Closing after a failure: the failure is what the caller reports.
  }
}

// Descriptor calls on libuv's pool, for the descriptors the synchronous calls also use.
const openFd = promisify(openCallback);
const syncFd = promisify(fsyncCallback);
const datasyncFd = promisify(fdatasyncCallback);
const writeFd = promisify(writeCallback);

/** Writes all of chunk at position, synchronously. */
function writeAllSync(fd: number, chunk: Uint8Array, position: number): void {
  let at = 0;
  while (at < chunk.byteLength) {
    at += writeSync(fd, chunk, at, chunk.byteLength - at, position + at);
  }
}

/** Unlinks a file, leaving it to sweepTempFiles when that fails. */
function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Left for the sweep.
  }
}

/** Unlinks a file; true when this call removed it, false when it was already gone. */
async function unlinkIfPresent(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errnoOf(err) === "ENOENT") return false;
    throw err;
  }
}

/** Writes all of chunk at position on libuv's pool; positioned, so writes may overlap in time. */
async function writeAll(fd: number, chunk: Uint8Array, position: number): Promise<void> {
  let at = 0;
  while (at < chunk.byteLength) {
    at += (await writeFd(fd, chunk, at, chunk.byteLength - at, position + at)).bytesWritten;
  }
}

async function* readRange(
  handle: FileHandle,
  start: number,
  end: number,
  signal: AbortSignal | undefined,
  key: string,
  chunks: ChunkPool,
): AsyncGenerator<Uint8Array> {
  // Reads start small and double up to a full chunk: a window that stops after a few lines
  // reads (and reads ahead) kilobytes, not megabytes, while a bulk read reaches full chunks
  // within a few reads.
  let size = firstReadBytes;
  const readAt = async (position: number): Promise<Uint8Array> => {
    throwIfAborted(signal);
    const want = Math.min(size, end - position);
    size = Math.min(size * 2, readChunkBytes);
    // From the pool, so a reader that gives chunks back reuses them; not zero-filled: only
    // the bytes the read wrote are ever handed out.
    const buffer = chunks.take(want);
    const { bytesRead } = await handle.read(buffer, 0, want, position);
    return bytesRead === want ? buffer : buffer.subarray(0, bytesRead);
  };
  // The next chunk is read while the consumer works on this one, so the disk and the consumer
  // (a search scan, encoding for the wire) overlap instead of taking turns.
  let ahead: Promise<Uint8Array> | undefined = start < end ? readAt(start) : undefined;
  try {
    let position = start;
    while (ahead !== undefined) {
      const chunk = await ahead;
      if (chunk.byteLength === 0) return;
      position += chunk.byteLength;
      ahead = position < end ? readAt(position) : undefined;
      yield chunk;
    }
  } catch (err) {
    throw fromNodeError(err, key);
  } finally {
    // A consumer that stops early leaves a read in flight: let it settle before closing, and
    // give its chunk back (nobody ever saw it).
    const unread = await ahead?.catch(() => undefined);
    if (unread !== undefined) chunks.give(unread);
    await handle.close().catch(() => undefined);
  }
}
