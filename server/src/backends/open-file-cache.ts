import { closeSync, type Stats } from "node:fs";

/**
 * OpenFileCache keeps the descriptors of files the filesystem backend read recently, so that
 * reading the same file again (a window reads its record, its run, its line index and its
 * payload on every call) costs one lstat instead of an open, a descriptor check, an fstat and
 * a close.
 *
 * A kept descriptor is handed out only while an lstat of the path asked for names the very file
 * it was opened on (same device and inode, still a regular file): a file replaced by a rename,
 * a symlink planted in its place or a file deleted by anyone misses and is opened afresh, and
 * the stale descriptor of that path is closed. The path asked for may be another name of the
 * file (a hard link: the records of one pack are one file under each record's name); its bytes
 * are the file's whatever name reaches it, and the descriptor was opened, with every check,
 * under the name it was kept for. The cache is used from synchronous code only, so a
 * descriptor is never closed while a read of it is in flight.
 */
export interface OpenFileCache {
  /**
   * A descriptor kept for the file `found` (an lstat of path, just now) names: the one kept for
   * path, or one kept for another name of the same file.
   */
  take(path: string, found: Stats): number | undefined;
  /** Keeps fd, open on the regular file at path (checked by the caller), for later reads. */
  keep(path: string, fd: number, stats: Stats): void;
  /**
   * Closes the descriptor kept for path, if any (its file is being deleted), and with `fd` the
   * one kept as fd too, under whatever name (a read of it failed).
   */
  forget(path: string, fd?: number): void;
  /** Closes every kept descriptor and stops the idle check. */
  clear(): void;
}

/** OpenFileCacheOptions bound what the cache holds and for how long. */
export interface OpenFileCacheOptions {
  /** Most descriptors kept; the least recently used goes first. */
  readonly maxFiles: number;
  /**
   * A descriptor unused this long is closed, so a file deleted by another process (a replica,
   * `spillway sweep`) frees its disk space within about this time.
   */
  readonly idleMs: number;
}

interface Kept {
  readonly path: string;
  readonly fd: number;
  readonly dev: number;
  readonly ino: number;
  usedMs: number;
}

/** createOpenFileCache returns an empty OpenFileCache (see there). */
export function createOpenFileCache(opts: OpenFileCacheOptions): OpenFileCache {
  // A Map iterates in insertion order: re-inserting on use keeps the least recent first.
  const kept = new Map<string, Kept>();
  // The newest entry kept for each file, by device and inode.
  const byFile = new Map<string, Kept>();
  let timer: NodeJS.Timeout | undefined;

  const drop = (path: string, entry: Kept) => {
    kept.delete(path);
    const file = fileId(entry.dev, entry.ino);
    if (byFile.get(file) === entry) byFile.delete(file);
    try {
      closeSync(entry.fd);
    } catch {
      // Closing a descriptor nobody uses any more: nothing to report.
    }
    if (kept.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  };
  const closeIdle = () => {
    const before = Date.now() - opts.idleMs;
    for (const [path, entry] of kept) if (entry.usedMs <= before) drop(path, entry);
  };

  return {
    take(path, found) {
      const own = kept.get(path);
      if (own !== undefined && !(found.isFile() && isFileOf(own, found))) drop(path, own);
      if (!found.isFile()) return undefined;
      const entry = byFile.get(fileId(found.dev, found.ino));
      if (entry === undefined) return undefined;
      kept.delete(entry.path);
      entry.usedMs = Date.now();
      kept.set(entry.path, entry);
      return entry.fd;
    },
    keep(path, fd, stats) {
      const old = kept.get(path);
      if (old !== undefined) drop(path, old);
      const entry: Kept = { path, fd, dev: stats.dev, ino: stats.ino, usedMs: Date.now() };
      kept.set(path, entry);
      byFile.set(fileId(stats.dev, stats.ino), entry);
      if (kept.size > opts.maxFiles) {
        const [oldestPath, oldest] = kept.entries().next().value ?? [];
        if (oldestPath !== undefined && oldest !== undefined) drop(oldestPath, oldest);
      }
      if (timer === undefined) {
        timer = setInterval(closeIdle, Math.max(1, opts.idleMs / 2));
        timer.unref();
      }
    },
    forget(path, fd) {
      const entry = kept.get(path);
      if (entry !== undefined) drop(path, entry);
      if (fd === undefined) return;
      for (const [other, held] of kept) if (held.fd === fd) drop(other, held);
    },
    clear() {
      for (const [path, entry] of kept) drop(path, entry);
    },
  };
}

function isFileOf(entry: Kept, found: Stats): boolean {
  return found.dev === entry.dev && found.ino === entry.ino;
}

function fileId(dev: number, ino: number): string {
  return `${dev}:${ino}`;
}
