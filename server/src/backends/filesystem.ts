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
  readFileSync,
  readSync,
  realpathSync,
  statSync,
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
  LocalObject,
  ObjectInfo,
} from "./backend.js";
import { abortableBody, bytesBody, throwIfAborted } from "./body.js";
import { checkListLimit, checkRange, sweepCutoffMs } from "./call-options.js";
import {
  type ChunkPool,
  createChunkPool,
  firstReadBytes,
  readAlignBytes,
  readChunkBytes,
} from "./chunk-pool.js";
import {
  checkDescriptorPaths,
  directoryFlags,
  fileIsAt,
  inDirectory,
  pathOf,
} from "./descriptor-paths.js";
import { createDirectorySync } from "./directory-sync.js";
import { errnoOf, fromNodeError } from "./from-node-error.js";
import { alreadyExists, notFound } from "./object-errors.js";
import {
  checkKey,
  checkListPrefix,
  maxKeySegments,
  reservedSegmentPrefix as tempPrefix,
} from "./object-key.js";
import {
  createOpenFileCache,
  type OpenFileCache,
  type OpenFileCacheOptions,
} from "./open-file-cache.js";

/** Segments longer than this many UTF-8 bytes are stored under a hashed name. */
const maxSegmentBytes = 200;
/** Attempts at opening a temp file when a concurrent delete pruned its fresh directory. */
const openTempAttempts = 8;
/** Walks from the root a put makes while others prune the directories it makes its own in. */
const walkAttempts = 8;
/**
 * Objects and chunks up to this size are read and written with synchronous calls (see
 * createFilesystemBackend): from the page cache that takes microseconds, less than handing the
 * call to libuv's thread pool and back.
 */
const syncIoBytes = 64 * 1024;
/**
 * While a put streams, an fdatasync is started every time this much more has been written
 * (one at a time, on libuv's pool), so the disk writes the file as it arrives and the fsync
 * that ends the put waits only for the last stretch. Every dirty byte left when the body ends
 * is waited for, by every put that ends at the same moment: 8 MiB keeps that wait short when
 * many large offloads end together and costs a single large one nothing
 * (docs/design/every-core.md, "The flush after the last byte").
 */
const writebackBytes = 8 * 1024 * 1024;
/**
 * How many chunks of one put are written at once. Two let the kernel's page-cache copy of one
 * chunk (the largest single cost of a filesystem offload) overlap with the next, which made
 * 256 MiB offloads about 9 % faster than one at a time.
 */
const writesInFlight = 2;

/**
 * A directory of the tree held open, confirmed to be at `path` inside the root when it was
 * opened, and the directories opening it created. Its holder closes `fd`.
 */
interface OpenDirectory {
  readonly fd: number;
  readonly path: string;
  readonly created: readonly string[];
}

/** What stands under a name in a directory, for a caller that wants a directory there. */
type ChildDirectory = number | "missing" | "object";

/** FilesystemBackendOptions configure createFilesystemBackend. */
export interface FilesystemBackendOptions {
  /** Directory that holds every object; created `0700` when missing. */
  readonly root: string;
  /** Whether put fsyncs the file and its directory before resolving. Default true. */
  readonly fsync?: boolean;
  /**
   * How many descriptors of recently read files stay open for the next small read, and for how
   * long unused (see open-file-cache.ts). Default 256 files (a quarter of the process's open
   * file limit when that is lower), 5 s.
   */
  readonly openFiles?: OpenFileCacheOptions;
}

/**
 * The descriptors kept by default: 256, or a quarter of the process's limit on open files when
 * that is lower, so that descriptors kept for reads never starve the calls' own (at
 * `ulimit -n 128`, 256 kept ones made one client's sequential offloads fail EMFILE).
 */
function defaultOpenFiles(): OpenFileCacheOptions {
  return { maxFiles: Math.min(256, Math.floor(openFileLimit() / 4)), idleMs: 5_000 };
}

/** The process's soft limit on open files (`/proc/self/limits`), or Infinity when unknown. */
export function openFileLimit(): number {
  try {
    const limits = readFileSync("/proc/self/limits", "utf8");
    const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
    return soft === undefined || soft === "unlimited" ? Number.POSITIVE_INFINITY : Number(soft);
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** FilesystemBackend is a Backend over a local directory, with crash-leftover cleanup. */
export type FilesystemBackend = Backend & {
  /** Absolute path of the root directory. */
  readonly root: string;
  /** Always present here: a put is putMany under one name. */
  putMany: NonNullable<Backend["putMany"]>;
  /** Always present here: every object is a file under the root. */
  openLocal: NonNullable<Backend["openLocal"]>;
  /**
   * Deletes temp files (`.tmp-*`, left by a crash mid-put) last modified more than
   * `olderThanMs` ago, anywhere under the root, without following symlinks; returns how many.
   */
  sweepTempFiles(olderThanMs: number): Promise<number>;
  /** Same as sweepTempFiles, with a signal checked between directories. */
  sweepLeftovers(olderThanMs: number, opts?: BackendCallOptions): Promise<number>;
  /** What the streams get returned have read so far and hold now (see FilesystemReads). */
  reads(): FilesystemReads;
};

/** FilesystemReads is what a filesystem backend's streaming reads have done and hold. */
export interface FilesystemReads {
  /** Bytes read from files by the streams get returned, since the backend was created. */
  readonly bytes: number;
  /** Reads made or in flight ahead of their streams' consumers, not yet taken by them. */
  readonly ahead: number;
}

/**
 * Makes the root `0700`. A root this user may write but does not own (a volume whose group the
 * platform gave it, root:group 2770, as Kubernetes' fsGroup makes) cannot be chmodded: it is
 * served as it is while other users have no access to it, and refused, naming it, when they do.
 */
function tightenRoot(path: string): void {
  try {
    chmodSync(path, 0o700);
  } catch (err) {
    if (errnoOf(err) !== "EPERM") throw err;
    const mode = statSync(path).mode & 0o7777;
    if ((mode & 0o007) === 0) return;
    throw new ConnectError(
      `--data-dir: ${path}: owned by another user and open to every user (mode ${mode.toString(8).padStart(4, "0")}); this process cannot make it 0700: give it to this user, or take other users' access away`,
      Code.PermissionDenied,
    );
  }
}

/**
 * createFilesystemBackend returns a Backend (kind `filesystem`) storing key `a/b/c` at
 * `<root>/a/b/c`.
 *
 * Guarantees, beyond the Backend contract:
 * - the root is created (recursively) and chmodded to `0700` before this returns (one owned by
 *   another user is taken as it is while other users have no access to it); directories
 *   are created `0700` and files `0600`;
 * - keys and list prefixes are re-checked by the shared key rules (`object-key.ts`, which also
 *   reserves the `.tmp-` names of temp files) with `INVALID_ARGUMENT`; a segment longer than
 *   200 UTF-8 bytes is stored as `~` + sha256hex(segment), a name the service's encoded
 *   segments never take;
 * - no call acts outside the root, however the tree under it is changed meanwhile (a directory
 *   or file swapped for a symlink, a directory moved away): what a call opened is checked, not
 *   what a path looked like before. Reads open the file with `O_NOFOLLOW` and serve it only
 *   when the kernel's name for the open descriptor (`/proc/self/fd`) is the key's path; writes,
 *   deletes, listings and sweeps open the key's directory with `O_DIRECTORY | O_NOFOLLOW`, check
 *   its descriptor the same way (walking from the root one directory inside the other when
 *   that fails) and then create, link, unlink and read names inside that open directory
 *   (`inDirectory`), checking it again after publishing (a name linked into a directory that
 *   moved out is taken back). A symlink or a path leading outside fails the call with
 *   `FAILED_PRECONDITION`, and so does a FIFO, socket or device where an object is read,
 *   looked at or written (opened non-blocking, so a FIFO never holds a call; delete removes
 *   such a name); creating the backend fails the same way where `/proc/self/fd` is missing
 *   (it needs Linux);
 * - put writes a temp file beside the target (a large one with writeback started every 8 MiB,
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
 *   directory (puts never recreate it, and fail with the same code while it is missing) and
 *   with the node error while it cannot be written
 *   (`EROFS` on a read-only mount, `EACCES` for a user without write permission);
 * - a stream returned by get holds an open file until it is read to the end or abandoned
 *   with `break`/`return`, so callers always consume or close it;
 * - a small read keeps its file open for the next (`openFiles`, open-file-cache.ts), serving
 *   it again only while an lstat of the key's path names that same file: a renamed-over,
 *   deleted or symlinked path is opened and checked afresh. A file deleted through this
 *   backend is closed first; one deleted by another process stays open (its disk space held)
 *   until its descriptor has been unused for `openFiles.idleMs` or is displaced.
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
  const fsync = opts.fsync ?? true;
  const directorySync = createDirectorySync();
  // Sixteen free chunks (16 MiB) cover the read-ahead and the HTTP/2 writes in flight of
  // several concurrent reads.
  const chunks = createChunkPool(readChunkBytes, 16);
  const reading = { bytes: 0, ahead: 0 };
  const files = createOpenFileCache(opts.openFiles ?? defaultOpenFiles());
  /** Names of the temp files this backend is writing or publishing now. */
  const writingTemps = new Set<string>();
  let root: string;
  try {
    const given = resolve(opts.root);
    mkdirSync(given, { recursive: true, mode: 0o700 });
    tightenRoot(given);
    // Every path is built from the real root, so the kernel's name for a descriptor opened
    // inside it is exactly the path built for it.
    root = realpathSync(given);
  } catch (err) {
    throw fromNodeError(err);
  }
  checkDescriptorPaths(root);

  function directoryPath(dirSegments: readonly string[]): string {
    return dirSegments.length === 0 ? root : child(root, dirSegments.join("/"));
  }

  /** The path of a key's file, built from the real root. */
  function filePath(key: string): string {
    return child(root, checkKey(key).split("/").map(diskName).join("/"));
  }

  /**
   * The error for a root that is gone: FAILED_PRECONDITION, as the probe reports it. Clients
   * see no server path; the cause names the root for the operator's log.
   */
  function rootMissing(): ConnectError {
    return rootFailure("is missing");
  }

  function rootFailure(what: string): ConnectError {
    const cause = new Error(`the data root ${root} ${what}`);
    return new ConnectError(
      `the data root ${what}`,
      Code.FailedPrecondition,
      undefined,
      undefined,
      cause,
    );
  }

  /**
   * Throws rootMissing when the root is gone. Called where a read finds nothing: with the root
   * removed every key is missing, and "no such object" would tell a client its handle was
   * forged or its run never existed, when the store is what failed.
   */
  function checkRootPresent(): void {
    if (lstatSync(root, { throwIfNoEntry: false })?.isDirectory() !== true) throw rootMissing();
  }

  /** Whether err says a key (or a directory on its way) does not exist. */
  function isMissing(err: unknown): boolean {
    return errnoOf(err) === "ENOENT" || (err instanceof ConnectError && err.code === Code.NotFound);
  }

  /**
   * Opens the directory of a key's segments, confirmed inside the root. When `create` is false
   * a missing directory (or a file in its place) yields undefined: no object can be below it.
   * A symlink on the way is FAILED_PRECONDITION.
   */
  function openDirectory(
    dirSegments: readonly string[],
    create: true,
    key: string,
  ): Promise<OpenDirectory>;
  function openDirectory(
    dirSegments: readonly string[],
    create: false,
    key: string,
  ): Promise<OpenDirectory | undefined>;
  async function openDirectory(
    dirSegments: readonly string[],
    create: boolean,
    key: string,
  ): Promise<OpenDirectory | undefined> {
    // One open by path and a look at where it landed: the kernel's name for the descriptor is
    // the path asked for only when no symlink was followed on the way.
    const path = directoryPath(dirSegments);
    let fd: number | undefined;
    try {
      fd = openSync(path, directoryFlags);
    } catch {
      // Missing, or not a plain directory on the way: the walk below finds out which.
    }
    if (fd !== undefined) {
      if (pathOf(fd) === path) return { fd, path, created: [] };
      closeQuietly(fd);
    }
    return create
      ? walkDirectories(dirSegments, true, key)
      : walkDirectories(dirSegments, false, key);
  }

  /**
   * Opens a key's directory one segment at a time from the root, each inside the directory
   * opened before it (see inDirectory), creating missing ones when asked.
   */
  function walkDirectories(
    dirSegments: readonly string[],
    create: true,
    key: string,
  ): Promise<OpenDirectory>;
  function walkDirectories(
    dirSegments: readonly string[],
    create: false,
    key: string,
  ): Promise<OpenDirectory | undefined>;
  async function walkDirectories(
    dirSegments: readonly string[],
    create: boolean,
    key: string,
  ): Promise<OpenDirectory | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await walkDirectoriesOnce(dirSegments, create, key);
      } catch (err) {
        // mkdir answers ENOENT when the directory it makes a child in was removed since the walk
        // opened it: a failed upload or a delete beside this one pruned it, empty. Walk again.
        if (!create || errnoOf(err) !== "ENOENT" || attempt >= walkAttempts) throw err;
      }
    }
  }

  async function walkDirectoriesOnce(
    dirSegments: readonly string[],
    create: boolean,
    key: string,
  ): Promise<OpenDirectory | undefined> {
    let fd: number;
    try {
      fd = openSync(root, directoryFlags);
    } catch (err) {
      // Writes never recreate the root: its absence is the store's fault, not the key's.
      if (create && errnoOf(err) === "ENOENT") throw rootMissing();
      throw err;
    }
    let path = root;
    const created: string[] = [];
    try {
      for (const segment of dirSegments) {
        let next = openChildDirectory(fd, segment, key);
        // A concurrent delete may prune a directory between creating and opening it.
        for (
          let attempt = 1;
          next === "missing" && create && attempt <= openTempAttempts;
          attempt++
        ) {
          try {
            await mkdir(inDirectory(fd, segment), { mode: 0o700 });
            created.push(child(path, segment));
          } catch (err) {
            if (errnoOf(err) !== "EEXIST") throw err;
          }
          next = openChildDirectory(fd, segment, key);
        }
        if (typeof next !== "number") {
          if (!create) return undefined;
          if (next === "missing") throw notFound(key);
          throw new ConnectError(
            `a prefix of the key is an object, so the key cannot be stored (key "${key}")`,
            Code.FailedPrecondition,
          );
        }
        closeQuietly(fd);
        fd = next;
        path = child(path, segment);
      }
      // A directory on the way moved (out of the root, say) while the walk went on below it.
      if (pathOf(fd) !== path) throw outsideRefused(key);
      const opened = { fd, path, created };
      fd = -1;
      return opened;
    } finally {
      if (fd >= 0) closeQuietly(fd);
    }
  }

  async function openTemp(
    dirSegments: readonly string[],
    key: string,
  ): Promise<{ fd: number; name: string; dir: OpenDirectory }> {
    for (let attempt = 1; ; attempt++) {
      const dir = await openDirectory(dirSegments, true, key);
      // randomUUID draws on a buffer of random bytes that node:crypto refills in batches; a
      // randomBytes call per name went to OpenSSL every time (~12 µs per put in a profile).
      const name = `${tempPrefix}${randomUUID()}`;
      try {
        // Asynchronous: creating a file can wait on the file system's journal (measured: half a
        // millisecond on ext4 while other puts fsync), and that wait must not stall the process.
        const fd = await openFd(
          inDirectory(dir.fd, name),
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o600,
        );
        if (pathOf(dir.fd) !== dir.path) {
          // The directory moved out of its place before the file was made: nothing is written.
          closeQuietly(fd);
          unlinkQuietly(inDirectory(dir.fd, name));
          throw outsideRefused(key);
        }
        writingTemps.add(name);
        return { fd, name, dir };
      } catch (err) {
        closeQuietly(dir.fd);
        // A concurrent delete may prune the directory between opening and creating; walk again.
        if (errnoOf(err) !== "ENOENT" || attempt >= openTempAttempts) throw err;
      }
    }
  }

  async function syncDirectories(dirs: Iterable<string>): Promise<void> {
    await Promise.all([...new Set(dirs)].map((dir) => directorySync.sync(dir)));
  }

  /**
   * Collects keys below the open directory in ascending order, after startAfter, until `out`
   * holds `want`. An entry that is no object (a symlink, a special file, a directory that cannot
   * be read) fails the call, or is added to `refusals` when that is given.
   */
  async function collectKeys(
    dirFd: number,
    keyBase: string,
    depth: number,
    namePrefix: string,
    startAfter: string | undefined,
    out: string[],
    want: number,
    signal: AbortSignal | undefined,
    refusals: { key: string; reason: ConnectError }[] | undefined,
  ): Promise<void> {
    throwIfAborted(signal);
    const refuse = (key: string, reason: ConnectError) => {
      if (refusals === undefined) throw reason;
      refusals.push({ key, reason });
    };
    // A refused entry (a symlink, a special file) takes its place in key order like a file, so
    // it is reported once, by the page whose range holds it.
    const items: { name: string; path: string; kind: "dir" | "file" | "refused" }[] = [];
    let entries: Dirent[];
    try {
      entries = await readdir(inDirectory(dirFd, ""), { withFileTypes: true });
    } catch (err) {
      refuse(keyBase, fromNodeError(err, keyBase));
      return;
    }
    for (const entry of entries) {
      if (!entry.name.startsWith(namePrefix) || entry.name.startsWith(tempPrefix)) continue;
      const path = `${keyBase}${entry.name}`;
      // A directory sorts as `name/`, so depth-first order is exactly ascending key order.
      if (entry.isDirectory()) items.push({ name: entry.name, path: `${path}/`, kind: "dir" });
      else if (entry.isFile()) items.push({ name: entry.name, path, kind: "file" });
      else if (entry.isSymbolicLink() || refusals !== undefined)
        items.push({ name: entry.name, path, kind: "refused" });
    }
    items.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    for (const item of items) {
      if (out.length >= want) return;
      if (item.kind === "dir") {
        // Every key below starts with item.path; all of them are <= startAfter when it is past it.
        const skip =
          startAfter !== undefined && item.path < startAfter && !startAfter.startsWith(item.path);
        if (skip) continue;
        const entryKey = item.path.slice(0, -1);
        if (depth + 2 > maxKeySegments) {
          // No key lies below; a planted nest is not walked (one open directory per level).
          refuse(entryKey, tooDeep(entryKey));
          continue;
        }
        let below: ChildDirectory;
        try {
          below = openChildDirectory(dirFd, item.name, entryKey);
        } catch (err) {
          refuse(entryKey, fromNodeError(err, entryKey));
          continue;
        }
        // Gone, or replaced by a file, since the directory was read.
        if (typeof below !== "number") continue;
        try {
          await collectKeys(
            below,
            item.path,
            depth + 1,
            "",
            startAfter,
            out,
            want,
            signal,
            refusals,
          );
        } finally {
          closeQuietly(below);
        }
      } else if (startAfter === undefined || item.path > startAfter) {
        if (item.kind === "file") out.push(item.path);
        else {
          const stats = lstatIfPresent(inDirectory(dirFd, item.name));
          if (stats?.isSymbolicLink() === true) refuse(item.path, symlinkRefused(item.path));
          else if (stats !== undefined) refuse(item.path, notPlain(item.path));
        }
      }
    }
  }

  async function sweepDirectory(
    dirFd: number,
    depth: number,
    cutoffMs: number,
    signal: AbortSignal | undefined,
  ): Promise<number> {
    throwIfAborted(signal);
    let entries: Dirent[];
    try {
      entries = await readdir(inDirectory(dirFd, ""), { withFileTypes: true });
    } catch (err) {
      // A concurrent delete may prune a directory while the sweep walks it.
      if (errnoOf(err) === "ENOENT") return 0;
      throw err;
    }
    let removed = 0;
    for (const entry of entries) {
      if (entry.isDirectory()) {
        // Temp files lie beside keys; a directory deeper than keys go holds none of ours.
        if (depth + 2 > maxKeySegments) continue;
        let below: ChildDirectory;
        try {
          below = openChildDirectory(dirFd, entry.name, entry.name);
        } catch {
          // A symlink swapped in since the directory was read: never followed.
          continue;
        }
        if (typeof below !== "number") continue;
        // Its time before the walk below: removing what it holds makes it new again.
        const before = lstatIfPresent(inDirectory(dirFd, entry.name));
        try {
          removed += await sweepDirectory(below, depth + 1, cutoffMs, signal);
        } finally {
          closeQuietly(below);
        }
        // One unchanged since before the cutoff and empty now (left by an interrupted upload,
        // or a delete cut short) goes too; a put racing this finds it gone and makes it again.
        // Not one at the root, where keys begin: the operator's (lost+found of a data directory
        // that is its file system's root).
        if (depth > 0 && before?.isDirectory() === true && before.mtimeMs < cutoffMs) {
          await rmdir(inDirectory(dirFd, entry.name)).catch(() => undefined);
        }
      } else if (
        entry.isFile() &&
        entry.name.startsWith(tempPrefix) &&
        // Never one this process is writing, however old its time makes it look (a clock
        // stepped forward past --orphan-age-ms swept an upload under way).
        !writingTemps.has(entry.name)
      ) {
        const path = inDirectory(dirFd, entry.name);
        const stats = lstatIfPresent(path);
        if (stats?.isFile() === true && stats.mtimeMs < cutoffMs && (await unlinkIfPresent(path))) {
          removed++;
        }
      }
    }
    return removed;
  }

  /** Removes directories of dirSegments left empty, deepest first, up to (not including) the root. */
  async function pruneEmptyDirectories(dirSegments: readonly string[], key: string): Promise<void> {
    for (let depth = dirSegments.length; depth > 0; depth--) {
      let parent: OpenDirectory | undefined;
      try {
        parent = await openDirectory(dirSegments.slice(0, depth - 1), false, key);
        if (parent === undefined) return;
        await rmdir(inDirectory(parent.fd, dirSegments[depth - 1] ?? ""));
      } catch {
        // Not empty (a sibling or an in-flight temp file) or already gone: stop pruning.
        return;
      } finally {
        if (parent !== undefined) closeQuietly(parent.fd);
      }
    }
  }

  /**
   * Removes the file stored under key, if any, through its directory as opened and checked
   * (never a path looked at earlier), and returns that directory's segments for pruning, or
   * undefined when there was nothing to remove.
   */
  async function unlinkKey(
    key: string,
    signal: AbortSignal | undefined,
  ): Promise<readonly string[] | undefined> {
    const { dirSegments, name } = splitKey(key);
    let dir: OpenDirectory | undefined;
    try {
      throwIfAborted(signal);
      dir = await openDirectory(dirSegments, false, key);
      if (dir === undefined) return undefined;
      const final = inDirectory(dir.fd, name);
      const stats = lstatIfPresent(final);
      if (stats === undefined || stats.isDirectory()) return undefined;
      if (stats.isSymbolicLink()) throw symlinkRefused(key);
      files.forget(filePath(key));
      await unlinkIfPresent(final);
      return dirSegments;
    } catch (err) {
      throw fromNodeError(err, key);
    } finally {
      if (dir !== undefined) closeQuietly(dir.fd);
    }
  }

  /**
   * Writes body to a new temp file in the directory of dirSegments (created as needed), fsyncs
   * and closes it. On any failure or abort the temp file is gone, the directory closed and the
   * error mapped; the caller publishes the temp file under its names, unlinks it and closes
   * the directory.
   */
  async function writeTemp(
    dirSegments: readonly string[],
    key: string,
    body: AsyncIterable<Uint8Array>,
    signal: AbortSignal | undefined,
  ): Promise<{ tempName: string; dir: OpenDirectory; size: number }> {
    let fd: number | undefined;
    let opened: { name: string; dir: OpenDirectory } | undefined;
    try {
      throwIfAborted(signal);
      const temp = await openTemp(dirSegments, key);
      fd = temp.fd;
      opened = temp;
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
      return { tempName: temp.name, dir: temp.dir, size };
    } catch (err) {
      if (fd !== undefined) closeQuietly(fd);
      if (opened !== undefined) {
        await unlinkIfPresent(inDirectory(opened.dir.fd, opened.name)).catch(() => false);
        writingTemps.delete(opened.name);
        closeQuietly(opened.dir.fd);
        // The directories made for this upload, left empty (every cancelled offload left its
        // `r/<run>/b/<call>/` behind, and listing runs slowed with them).
        await pruneEmptyDirectories(dirSegments, key);
      }
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
      const temp = inDirectory(written.dir.fd, written.tempName);
      // Each directory named is opened once; every link is made inside the open directory.
      const open = new Map<string, OpenDirectory>([[written.dir.path, written.dir]]);
      // Every directory opened, closed only at the end (a descriptor closed earlier could have
      // its number reused while a path built on it is still in use).
      const held = new Set<OpenDirectory>([written.dir]);
      const linked = new Map<OpenDirectory, { index: number; key: string; name: string }[]>();
      const results: (ObjectInfo | ConnectError)[] = [];
      try {
        for (const { key, dirSegments, name } of targets) {
          try {
            for (let attempt = 1; ; attempt++) {
              const path = directoryPath(dirSegments);
              let dir = open.get(path);
              if (dir === undefined) {
                dir = await openDirectory(dirSegments, true, key);
                open.set(path, dir);
                held.add(dir);
              }
              try {
                publish(temp, dir.fd, name, key);
              } catch (err) {
                if (errnoOf(err) === "ENOENT" && lstatIfPresent(temp) === undefined) {
                  throw tempGone(key);
                }
                // A concurrent delete may prune the directory between opening and linking.
                if (errnoOf(err) !== "ENOENT" || attempt >= openTempAttempts) throw err;
                open.delete(path);
                continue;
              }
              const names = linked.get(dir) ?? [];
              names.push({ index: results.length, key, name });
              linked.set(dir, names);
              results.push({ size: written.size, modifiedMs: Date.now() });
              break;
            }
          } catch (err) {
            results.push(fromNodeError(err, key));
          }
        }
        // Once per directory, after its links: one that moved out of the root meanwhile takes
        // its names back.
        for (const [dir, names] of linked) {
          if (pathOf(dir.fd) === dir.path) continue;
          for (const { index, key, name } of names) {
            unlinkQuietly(inDirectory(dir.fd, name));
            results[index] = outsideRefused(key);
          }
          linked.delete(dir);
        }
      } finally {
        unlinkQuietly(temp);
        writingTemps.delete(written.tempName);
        for (const dir of held) closeQuietly(dir.fd);
      }
      const synced = new Set<string>(written.dir.created.map((created) => dirname(created)));
      for (const dir of linked.keys()) {
        synced.add(dir.path);
        for (const created of dir.created) synced.add(dirname(created));
      }
      try {
        if (fsync) await syncDirectories(synced);
      } catch (err) {
        throw fromNodeError(err, first.key);
      }
      return results;
    },

    async get(key: string, getOpts?: GetOptions) {
      const signal = getOpts?.signal;
      const path = filePath(key);
      const { offset, length } = checkRange(getOpts);
      let handle: FileHandle | undefined;
      try {
        throwIfAborted(signal);
        const found = lookUpObject(path, key);
        if (found.isFile() && rangeEnd(found.size, offset, length) - offset <= syncIoBytes) {
          return readSmall(path, found, offset, length, key, files);
        }
        const opened = await openFile(path, key);
        handle = opened.handle;
        const end = rangeEnd(opened.stats.size, offset, length);
        const stream = closedIfNeverRead(
          readRange(handle, offset, end, signal, key, chunks, reading),
          handle,
        );
        handle = undefined;
        return stream;
      } catch (err) {
        await handle?.close().catch(() => undefined);
        if (isMissing(err)) checkRootPresent();
        throw fromNodeError(err, key);
      }
    },

    async openLocal(key: string, callOpts?: BackendCallOptions): Promise<LocalObject> {
      const path = filePath(key);
      try {
        throwIfAborted(callOpts?.signal);
        lookUpObject(path, key);
        const { handle, stats } = await openFile(path, key);
        return { fd: handle.fd, size: stats.size, close: () => handle.close() };
      } catch (err) {
        if (isMissing(err)) checkRootPresent();
        throw fromNodeError(err, key);
      }
    },

    async head(key: string, callOpts?: BackendCallOptions): Promise<ObjectInfo | undefined> {
      const signal = callOpts?.signal;
      const path = filePath(key);
      let fd: number | undefined;
      try {
        throwIfAborted(signal);
        const found = lookUp(path);
        if (found === undefined) checkRootPresent();
        if (found === undefined || found.isDirectory()) return undefined;
        if (found.isSymbolicLink()) throw symlinkRefused(key);
        if (isSpecial(found)) throw notPlain(key);
        fd = openSync(path, readFlags);
        if (!fileIsAt(fd, path)) throw outsideRefused(key);
        const stats = fstatSync(fd);
        if (stats.isDirectory()) return undefined;
        if (!stats.isFile()) throw notPlain(key);
        return { size: stats.size, modifiedMs: stats.mtimeMs };
      } catch (err) {
        // Gone between the lookup and the open.
        if (errnoOf(err) === "ENOENT") {
          checkRootPresent();
          return undefined;
        }
        throw fromNodeError(err, key);
      } finally {
        if (fd !== undefined) closeQuietly(fd);
      }
    },

    async list(prefix: string, listOpts?: ListOptions): Promise<ListPage> {
      const signal = listOpts?.signal;
      const limit = checkListLimit(listOpts);
      checkListPrefix(prefix);
      const cut = prefix.lastIndexOf("/");
      const dirSegments = cut < 0 ? [] : prefix.slice(0, cut).split("/").map(diskName);
      const namePrefix = prefix.slice(cut + 1);
      let dir: OpenDirectory | undefined;
      try {
        throwIfAborted(signal);
        dir = await openDirectory(dirSegments, false, prefix);
        if (dir === undefined) {
          checkRootPresent();
          return { keys: [], truncated: false };
        }
        const keys: string[] = [];
        const keyBase = dirSegments.map((s) => `${s}/`).join("");
        const onRefused = listOpts?.onRefused;
        const refusals: { key: string; reason: ConnectError }[] | undefined =
          onRefused === undefined ? undefined : [];
        await collectKeys(
          dir.fd,
          keyBase,
          dirSegments.length,
          namePrefix,
          listOpts?.startAfter,
          keys,
          limit + 1,
          signal,
          refusals,
        );
        const truncated = keys.length > limit;
        const last = truncated ? keys[limit - 1] : undefined;
        // Entries past the page's last key belong to the next page, which finds them again.
        for (const { key, reason } of refusals ?? []) {
          if (last === undefined || key < last) onRefused?.(key, reason);
        }
        return { keys: keys.slice(0, limit), truncated };
      } catch (err) {
        if (isMissing(err)) checkRootPresent();
        throw fromNodeError(err, prefix);
      } finally {
        if (dir !== undefined) closeQuietly(dir.fd);
      }
    },

    async delete(key: string, callOpts?: BackendCallOptions): Promise<void> {
      checkRootPresent();
      const dirSegments = await unlinkKey(key, callOpts?.signal);
      if (dirSegments !== undefined) await pruneEmptyDirectories(dirSegments, key);
    },

    async deleteMany(keys: readonly string[], callOpts?: BackendCallOptions): Promise<void> {
      // A bad key refuses the whole batch before anything is deleted, as on the object stores.
      for (const key of keys) checkKey(key);
      checkRootPresent();
      // Unlinks are independent; a few at a time keeps file-descriptor use bounded. Each
      // directory is pruned once, after its files are gone, not once for every file.
      const dirs = new Map<string, { segments: readonly string[]; key: string }>();
      for (let i = 0; i < keys.length; i += 16) {
        const batch = keys.slice(i, i + 16);
        const unlinked = await Promise.all(batch.map((key) => unlinkKey(key, callOpts?.signal)));
        for (const [j, segments] of unlinked.entries()) {
          if (segments !== undefined) {
            dirs.set(segments.join("/"), { segments, key: batch[j] ?? "" });
          }
        }
      }
      for (const { segments, key } of dirs.values()) await pruneEmptyDirectories(segments, key);
    },

    release(chunk: Uint8Array): void {
      chunks.give(chunk);
    },

    reads(): FilesystemReads {
      return { ...reading };
    },

    async probe(callOpts?: BackendCallOptions): Promise<void> {
      throwIfAborted(callOpts?.signal);
      // The root itself must still be a writable directory: every put walks down from it and
      // never recreates it.
      let stats: Stats;
      try {
        stats = await lstat(root);
      } catch (err) {
        if (errnoOf(err) !== "ENOENT") throw fromNodeError(err);
        throw rootMissing();
      }
      if (!stats.isDirectory()) throw rootFailure("is no longer a directory");
      try {
        await access(root, constants.W_OK | constants.X_OK);
      } catch (err) {
        throw fromNodeError(err);
      }
    },

    async close(): Promise<void> {
      files.clear();
    },

    async sweepTempFiles(olderThanMs: number): Promise<number> {
      return backend.sweepLeftovers(olderThanMs);
    },

    async sweepLeftovers(olderThanMs: number, callOpts?: BackendCallOptions): Promise<number> {
      const cutoffMs = sweepCutoffMs(olderThanMs);
      try {
        throwIfAborted(callOpts?.signal);
        const dir = await openDirectory([], false, "");
        if (dir === undefined) return 0;
        try {
          return await sweepDirectory(dir.fd, 0, cutoffMs, callOpts?.signal);
        } finally {
          closeQuietly(dir.fd);
        }
      } catch (err) {
        throw fromNodeError(err);
      }
    },
  };
  return backend;
}

/**
 * The path of `name` inside `dir`, for a directory path this backend made (the real root or a
 * path built by this function) and names that are neither empty, "." nor "..", alone or joined
 * by "/" (checked keys' segments, or a name read from a directory). Such a path is already
 * normal, so plain concatenation gives what path.join would, without its normalizing pass,
 * which allocated a string per segment and showed as the largest allocator of a small put.
 */
function child(dir: string, name: string): string {
  return dir.endsWith("/") ? `${dir}${name}` : `${dir}/${name}`;
}

/** Checks a key and splits it into the on-disk names of its directories and its file. */
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

/**
 * The error for a put whose temp file was removed before it was published (a sweep in another
 * process, whose clock said it was old): UNAVAILABLE, since sending the bytes again succeeds.
 */
function tempGone(key: string): ConnectError {
  return new ConnectError(
    `the upload's temporary file was removed before it was stored, by another process's sweep or cleanup; retry (key "${key}")`,
    Code.Unavailable,
  );
}

/** The path of a key led outside the root when it was used (a symlink or a moved directory). */
function outsideRefused(key: string): ConnectError {
  return new ConnectError(
    `refusing a path that leads outside the storage root: a symlink or a moved directory (key "${key}")`,
    Code.FailedPrecondition,
  );
}

function tooDeep(key: string): ConnectError {
  return new ConnectError(
    `refusing a directory under the storage root nested deeper than any key (key "${key}")`,
    Code.FailedPrecondition,
  );
}

function notPlain(key: string): ConnectError {
  return new ConnectError(
    `refusing an entry under the storage root that is neither a file nor a directory (key "${key}")`,
    Code.FailedPrecondition,
  );
}

/**
 * Opens the directory `name` inside the open directory `dirFd`, or says why not: "missing", or
 * "object" for a file (or a special file) in its place. A symlink in its place is
 * FAILED_PRECONDITION.
 */
function openChildDirectory(dirFd: number, name: string, key: string): ChildDirectory {
  const path = inDirectory(dirFd, name);
  try {
    return openSync(path, directoryFlags);
  } catch (err) {
    const errno = errnoOf(err);
    if (errno === "ENOENT") return "missing";
    if (errno !== "ENOTDIR" && errno !== "ELOOP") throw err;
    const stats = lstatIfPresent(path);
    if (stats?.isSymbolicLink() === true) throw symlinkRefused(key);
    // A directory here now was created after the failed open: the caller opens it again.
    return stats === undefined || stats.isDirectory() ? "missing" : "object";
  }
}

/** A FIFO, socket or device: never opened for its bytes, whatever it would hand out. */
function isSpecial(stats: Stats): boolean {
  return !stats.isFile() && !stats.isDirectory() && !stats.isSymbolicLink();
}

/** Why an opened entry that is not a file is no object: missing (a directory) or refused. */
function notFileError(stats: Stats, key: string): ConnectError {
  return stats.isDirectory() ? notFound(key) : notPlain(key);
}

function occupied(stats: Stats, key: string): ConnectError {
  if (stats.isSymbolicLink()) return symlinkRefused(key);
  if (stats.isFile()) return alreadyExists(key);
  if (isSpecial(stats)) return notPlain(key);
  return new ConnectError(
    `the key is a prefix of other objects, so it cannot be stored (key "${key}")`,
    Code.FailedPrecondition,
  );
}

/**
 * Links a finished temp file under `name` in the open directory `dirFd`, create-only. What
 * already holds the name is looked at only when the link fails: a put to a free name (every
 * new offload) makes no lookup of its own.
 */
function publish(tempPath: string, dirFd: number, name: string, key: string): void {
  const target = inDirectory(dirFd, name);
  try {
    linkSync(tempPath, target);
  } catch (err) {
    const existing = errnoOf(err) === "EEXIST" ? lstatIfPresent(target) : undefined;
    throw existing === undefined ? err : occupied(existing, key);
  }
}

/** The flags every read opens a file with (O_NONBLOCK: a planted FIFO must not hang the open). */
const readFlags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Opens the file at `path` for reading and refuses, once it is open, what no read may touch:
 * a file the kernel names outside the root, or anything but a regular file.
 */
async function openFile(path: string, key: string): Promise<{ handle: FileHandle; stats: Stats }> {
  // O_NONBLOCK keeps a planted FIFO from hanging the open; it changes nothing for files.
  const handle = await open(path, readFlags);
  try {
    if (!fileIsAt(handle.fd, path)) throw outsideRefused(key);
    const stats = await handle.stat();
    if (!stats.isFile()) throw notFileError(stats, key);
    return { handle, stats };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/** lstat without the exception (and its stack trace) for a missing entry. */
function lstatIfPresent(path: string): Stats | undefined {
  return lstatSync(path, { throwIfNoEntry: false });
}

/**
 * lstat of an object's path, undefined when nothing is there or a file stands where a
 * directory of the path should be. It only saves opening what is missing: the path may pass
 * through a symlink, so whatever is opened after it is checked on its descriptor.
 */
function lookUp(path: string): Stats | undefined {
  try {
    return lstatIfPresent(path);
  } catch (err) {
    if (errnoOf(err) === "ENOTDIR") return undefined;
    throw err;
  }
}

/**
 * The lookup a read starts with: a missing object (every new offload asks) costs no failed
 * open. NOT_FOUND for nothing or a directory, refused for a FIFO, socket or device; it decides
 * nothing else: what is read is checked on the opened file (openFile).
 */
function lookUpObject(path: string, key: string): Stats {
  const found = lookUp(path);
  if (found === undefined || found.isDirectory()) throw notFound(key);
  if (isSpecial(found)) throw notPlain(key);
  return found;
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
  found: Stats,
  offset: number,
  length: number | undefined,
  key: string,
  files: OpenFileCache,
): AsyncIterable<Uint8Array> {
  let fd = files.take(path, found);
  let size = found.size;
  if (fd === undefined) {
    fd = openSync(path, readFlags);
    try {
      if (!fileIsAt(fd, path)) throw outsideRefused(key);
      const stats = fstatSync(fd);
      if (!stats.isFile()) throw notFileError(stats, key);
      size = stats.size;
      files.keep(path, fd, stats);
    } catch (err) {
      closeQuietly(fd);
      throw err;
    }
  }
  try {
    const end = rangeEnd(size, offset, length);
    const bytes = Buffer.allocUnsafe(Math.max(0, end - offset));
    let at = 0;
    while (at < bytes.byteLength) {
      const read = readSync(fd, bytes, at, bytes.byteLength - at, offset + at);
      if (read === 0) break;
      at += read;
    }
    return bytesBody(bytes.subarray(0, at));
  } catch (err) {
    files.forget(path, fd);
    throw err;
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

/** Reads a bulk read keeps in flight once its reads are whole chunks (see readRange). */
const bulkReadsAhead = 4;

/**
 * Reads that all of a backend's streams together may hold ahead of their consumers, each in a
 * pooled chunk (1 MiB, whatever its size): the chunk pool's free list, so read-ahead reuses
 * memory rather than allocating it. A stream's consumer can stop for as long as its caller
 * lets it (an HTTP/2 client that reads nothing holds a ReadToolOutput for the idle-stream
 * timeout): with read-ahead per stream, 200 such readers held 4 MiB each beyond the data frame
 * their calls reserve. Bounded for the backend, they hold 16 MiB between them.
 */
const readAheadChunks = 16;

/** A read of [next, next + want) on its way, or done. */
interface PendingRead {
  readonly want: number;
  readonly read: Promise<Uint8Array>;
}

/**
 * closedIfNeverRead returns `reader` with one change: ended (return or throw) before its first
 * read, it closes `handle` too. A generator ended before it starts never runs its body, so its
 * `finally` would leave the descriptor to the garbage collector: a read cancelled at once kept
 * a deleted payload's disk space for as long as an idle replica made no garbage (56 min seen).
 */
function closedIfNeverRead(
  reader: AsyncGenerator<Uint8Array>,
  handle: FileHandle,
): AsyncGenerator<Uint8Array> {
  let started = false;
  const closeUnstarted = async () => {
    if (!started) await handle.close().catch(() => undefined);
  };
  return {
    next(...args: [] | [unknown]) {
      started = true;
      return reader.next(...args);
    },
    async return(value?: unknown) {
      const result = await reader.return(value);
      await closeUnstarted();
      return result;
    },
    async throw(err?: unknown) {
      await closeUnstarted();
      return reader.throw(err);
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

async function* readRange(
  handle: FileHandle,
  start: number,
  end: number,
  signal: AbortSignal | undefined,
  key: string,
  chunks: ChunkPool,
  reading: { bytes: number; ahead: number },
): AsyncGenerator<Uint8Array> {
  // Reads start small and double up to a full chunk: a window that stops after a few lines
  // reads (and reads ahead) kilobytes, not megabytes, while a bulk read reaches full chunks
  // within a few reads.
  let size = firstReadBytes;
  let next = start;
  const readNext = (): PendingRead => {
    const want = Math.min(size - (next % readAlignBytes), end - next);
    const position = next;
    const read = (async () => {
      throwIfAborted(signal);
      // From the pool, so a reader that gives chunks back reuses them; not zero-filled: only
      // the bytes the read wrote are ever handed out.
      const buffer = chunks.take(want);
      const { bytesRead } = await handle.read(buffer, 0, want, position);
      reading.bytes += bytesRead;
      return bytesRead === want ? buffer : buffer.subarray(0, bytesRead);
    })();
    // Its failure surfaces when it is awaited; until then, with the reader busy elsewhere, it
    // must not count as an unhandled rejection (which ends the process).
    read.catch(() => undefined);
    next += want;
    size = Math.min(size * 2, readChunkBytes);
    return { want, read };
  };
  // Reads run ahead of the consumer while it holds a chunk, so the disk and the consumer (a
  // search scan, encoding for the wire) overlap instead of taking turns: one read while reads
  // are still growing, up to bulkReadsAhead once they are whole chunks (a bulk read, whose next
  // bytes are certain to be wanted), so several copies out of the page cache run at once on
  // the pool's threads. Each takes one of the backend's readAheadChunks and none is made while
  // all are taken: the consumer's next read is then made when it asks for it.
  const ahead: PendingRead[] = [];
  const readAhead = () => {
    while (
      ahead.length < (size === readChunkBytes ? bulkReadsAhead : 1) &&
      next < end &&
      reading.ahead < readAheadChunks
    ) {
      ahead.push(readNext());
      reading.ahead++;
    }
  };
  try {
    while (ahead.length > 0 || next < end) {
      // The read the consumer waits for: the first one ahead (its read-ahead chunk goes back
      // to the backend's share) or, with none ahead, one made now.
      const first = ahead.shift();
      if (first !== undefined) reading.ahead--;
      const item = first ?? readNext();
      const chunk = await item.read;
      // A short read means the file ended before `end`: nothing read after it counts.
      if (chunk.byteLength < item.want) {
        if (chunk.byteLength > 0) yield chunk;
        return;
      }
      readAhead();
      yield chunk;
    }
  } catch (err) {
    throw fromNodeError(err, key);
  } finally {
    // A consumer that stops early leaves reads ahead of it, some perhaps in flight: let them
    // settle before closing, and give their chunks back (nobody ever saw them).
    for (const item of ahead.splice(0)) {
      reading.ahead--;
      const unread = await item.read.catch(() => undefined);
      if (unread !== undefined) chunks.give(unread);
    }
    await handle.close().catch(() => undefined);
  }
}
