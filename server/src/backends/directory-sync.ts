import { closeSync, constants, fsync, openSync } from "node:fs";
import { promisify } from "node:util";

const fsyncFd = promisify(fsync);

/** DirectorySync makes directory entries durable, sharing fsyncs between concurrent callers. */
export interface DirectorySync {
  /**
   * Resolves once an fsync of `dir` that started after this call has completed, so every
   * entry created in `dir` before the call is on disk; rejects with that fsync's error.
   */
  sync(dir: string): Promise<void>;
}

/** One directory's state: the fsync running now, and the one queued behind it. */
interface DirectoryState {
  running: Promise<void> | undefined;
  queued: Promise<void> | undefined;
}

/**
 * fsyncDirectoryEntries opens a directory and fsyncs it, making its entries durable. Opening
 * and closing are synchronous (microseconds, cheaper than a trip through libuv's pool); only
 * the fsync waits on the disk.
 */
export async function fsyncDirectoryEntries(dir: string): Promise<void> {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * createDirectorySync returns a group-committing DirectorySync: a caller that arrives while
 * an fsync of the same directory runs joins the single fsync queued to start right after it,
 * so N concurrent puts into one directory cost about two directory fsyncs, not N. (The running
 * fsync may have started before the caller's entry existed, so it cannot be shared.)
 * `fsyncDirectory` does the actual work; tests wrap it to watch when fsyncs start and end.
 */
export function createDirectorySync(
  fsyncDirectory: (dir: string) => Promise<void> = fsyncDirectoryEntries,
): DirectorySync {
  const states = new Map<string, DirectoryState>();
  const start = (dir: string, state: DirectoryState): Promise<void> => {
    const run = fsyncDirectory(dir).finally(() => {
      state.running = undefined;
      const next = state.queued;
      state.queued = undefined;
      if (next === undefined) states.delete(dir);
    });
    state.running = run;
    return run;
  };
  return {
    sync(dir) {
      const state = states.get(dir);
      if (state === undefined) {
        const fresh: DirectoryState = { running: undefined, queued: undefined };
        states.set(dir, fresh);
        return start(dir, fresh);
      }
      if (state.running === undefined) return start(dir, state);
      const running = state.running;
      state.queued ??= running.then(
        () => start(dir, state),
        () => start(dir, state),
      );
      return state.queued;
    },
  };
}
