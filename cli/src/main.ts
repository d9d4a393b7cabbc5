import { runCli } from "./run-cli.js";

/**
 * runMain is the `spillway-cli` bin: runCli on process.argv with this process's streams; the
 * exit status is set once stdout has taken everything written to it.
 */
export function runMain(): void {
  void runCli(process.argv.slice(2), {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  }).then((code) => {
    process.exitCode = code;
    // Open HTTP/2 sessions would keep the process alive; what was written is flushed first.
    process.stdout.write("", () => process.exit(code));
  });
}
