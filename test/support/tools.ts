import { execFile } from "node:child_process";
import { homedir } from "node:os";
import { join } from "node:path";

/**
 * grpcurlPath is where scripts/install-grpcurl.sh puts the pinned grpcurl build:
 * `${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin/grpcurl`.
 */
export function grpcurlPath(): string {
  const cache = process.env.SPILLWAY_CACHE ?? join(homedir(), ".cache", "spillway");
  return join(cache, "bin", "grpcurl");
}

/** bufPath is the workspace's `buf` (the @bufbuild/buf package's binary). */
export const bufPath = join(import.meta.dirname, "../../node_modules/.bin/buf");

/** ToolRun is how a command line tool ended: its exit code and what it printed. */
export interface ToolRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * runTool runs a command without a shell and without blocking the event loop (the server under
 * test may run in this process), with `input` on its stdin (none: stdin is closed at once), and
 * resolves with how it ended; a command that cannot be started rejects.
 */
export function runTool(
  file: string,
  args: readonly string[],
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<ToolRun> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err === null) {
          resolve({ code: 0, stdout, stderr });
        } else if (typeof err.code === "string") {
          reject(err);
        } else {
          resolve({ code: err.code ?? 1, stdout, stderr });
        }
      },
    );
    child.stdin?.end(opts.input ?? "");
  });
}
