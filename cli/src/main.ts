import { createWriteStream, fstatSync, openSync } from "node:fs";
import { isatty } from "node:tty";
import { runCli } from "./run-cli.js";

/** Bytes queued for stdout before a write waits for the reader. */
const STDOUT_BUFFER = 4 * 1024 * 1024;

/**
 * stdoutStream is where the CLI writes its results. Node writes process.stdout to a pipe or a
 * file synchronously, so a slow reader (`| sha256sum`) blocked the event loop, and with it the
 * download, on every write; an fs stream writes from the thread pool while the next bytes
 * arrive, with `drain` for backpressure. A pipe is reopened through /proc/self/fd/1: fd 1's
 * own description may be non-blocking (Node makes it so once process.stdout or a stderr
 * sharing it is touched), and a thread-pool write would then fail with EAGAIN. A terminal,
 * a socket or a device keeps process.stdout.
 */
function stdoutStream(): NodeJS.WritableStream & { isTTY?: boolean } {
  if (isatty(1)) return process.stdout;
  try {
    const stats = fstatSync(1);
    if (stats.isFile()) {
      return createWriteStream("", { fd: 1, autoClose: false, highWaterMark: STDOUT_BUFFER });
    }
    if (stats.isFIFO()) {
      const fd = openSync("/proc/self/fd/1", "w");
      return createWriteStream("", { fd, highWaterMark: STDOUT_BUFFER });
    }
  } catch {
    // No /proc (not Linux): the synchronous stdout still works, only slower through a pipe.
  }
  return process.stdout;
}

/**
 * runMain is the `spillway-cli` bin: runCli on process.argv with this process's streams; the
 * process exits with the command's status once stdout has taken everything written to it.
 */
export function runMain(): void {
  const stdout = stdoutStream();
  void runCli(process.argv.slice(2), {
    stdin: process.stdin,
    stdout,
    stderr: process.stderr,
    env: process.env,
  }).then((code) => {
    process.exitCode = code;
    // Open HTTP/2 sessions would keep the process alive; what was written is flushed first.
    stdout.end(() => process.exit(code));
  });
}
