/**
 * KnownDirectories remembers, briefly, which paths were just verified to be real directories
 * (not symlinks), so a burst of operations under one directory walks it once, not every time.
 */
export interface KnownDirectories {
  /** True when `dir` was verified less than the time-to-live ago and not forgotten since. */
  has(dir: string): boolean;
  /** Records that `dir` was verified now. */
  add(dir: string): void;
  /** Forgets `dir` and every directory below it (it was removed, or an operation missed it). */
  forget(dir: string): void;
}

/**
 * createKnownDirectories returns a KnownDirectories whose entries expire after `ttlMs` and
 * which holds at most `maxEntries` (all are dropped when it is full), so memory is bounded
 * and a directory replaced behind the process's back is re-checked within `ttlMs`.
 */
export function createKnownDirectories(
  ttlMs = 1_000,
  maxEntries = 4_096,
  now: () => number = () => performance.now(),
): KnownDirectories {
  const verifiedAt = new Map<string, number>();
  return {
    has(dir) {
      const at = verifiedAt.get(dir);
      if (at === undefined) return false;
      if (now() - at < ttlMs) return true;
      verifiedAt.delete(dir);
      return false;
    },
    add(dir) {
      if (verifiedAt.size >= maxEntries) verifiedAt.clear();
      verifiedAt.set(dir, now());
    },
    forget(dir) {
      const below = `${dir}/`;
      for (const known of verifiedAt.keys()) {
        if (known === dir || known.startsWith(below)) verifiedAt.delete(known);
      }
    },
  };
}
