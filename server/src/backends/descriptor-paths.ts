import { closeSync, constants, openSync, readlinkSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";

/** Opens a directory, failing (ENOTDIR) when a symlink or anything else stands in its place. */
export const directoryFlags = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * inDirectory is a path that reaches `name` inside the directory open as `dirFd`, whatever was
 * renamed or swapped for a symlink on the way to it since it was opened: Linux resolves
 * `/proc/self/fd/<n>` to the open directory itself, so a call on this path acts in that
 * directory as `openat`, `linkat` or `unlinkat` would (Node offers none of them). `name` must be
 * a single name (no `/`); the call's own flags (O_NOFOLLOW, create-only) apply to it.
 */
export function inDirectory(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

/** pathOf is the directory or file open as `fd`, as the kernel names it now. */
export function pathOf(fd: number): string {
  return readlinkSync(`/proc/self/fd/${fd}`);
}

/**
 * fileIsAt tells whether the file open as `fd` is the one at `path` (an absolute path without
 * symlinks), or was until it was unlinked: a file opened through a symlink, or in a directory
 * that was moved, is somewhere else.
 */
export function fileIsAt(fd: number, path: string): boolean {
  const at = pathOf(fd);
  return at === path || at === `${path} (deleted)`;
}

/**
 * checkDescriptorPaths makes sure this system names open descriptors under /proc/self/fd (Linux
 * with /proc mounted), opening `realDir` (an absolute path without symlinks) to see; the
 * filesystem backend cannot confine its calls to its root without it.
 */
export function checkDescriptorPaths(realDir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(realDir, directoryFlags);
    if (pathOf(fd) === realDir) return;
  } catch {
    // Reported below.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  throw new ConnectError(
    "the filesystem backend needs Linux's /proc/self/fd to keep every call inside its root",
    Code.FailedPrecondition,
  );
}
