import { fstatSync } from "node:fs";
import { isatty } from "node:tty";
import { createFdWriter } from "./fd-writer.js";
import { runCli } from "./run-cli.js";

/** Bytes queued for stdout before a write waits for the reader. */
const STDOUT_BUFFER = 4 * 1024 * 1024;

/**
 * stdoutStream is where the CLI writes its results. Node writes process.stdout to a pipe or a
 * file synchronously, so a slow reader (`| sha256sum`) blocked the event loop, and with it the
 * download, on every write; a pipe, a socket (what a Node parent's `stdio: "pipe"` is) or a
 * file gets a writer whose writes run on the thread pool (createFdWriter), with `drain` for
 * backpressure. A terminal or a device keeps process.stdout.
 */
function stdoutStream(): NodeJS.WritableStream & { isTTY?: boolean } {
  if (isatty(1)) return process.stdout;
  try {
    const stats = fstatSync(1);
    if (stats.isFile() || stats.isFIFO() || stats.isSocket())
      return createFdWriter(1, STDOUT_BUFFER);
  } catch {
    // fd 1 closed or unknown: process.stdout reports it as it writes.
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
