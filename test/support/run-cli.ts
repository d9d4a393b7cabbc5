import { spawn } from "node:child_process";
import { spillwayCli } from "./spawn-spillway.js";

/** What one `spillway` run printed and how it ended. */
export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** How runCli runs the process, besides its arguments. */
export interface CliRunOptions {
  /** The working directory; this process's by default. */
  readonly cwd?: string | undefined;
  /** Run as this user and group (only root may); this process's by default. */
  readonly uid?: number;
  readonly gid?: number;
}

/**
 * runCli runs the compiled `spillway` executable with `args` and `env` over this process's
 * environment (drain delay 0), and resolves with all it printed and its exit code once it has
 * exited. A server that wrongly starts is killed after 15 seconds (a loaded machine takes
 * seconds just to start Node), so the caller still sees its output and a null exit code.
 */
export function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  how: CliRunOptions | string | undefined = {},
): Promise<CliRun> {
  const opts = typeof how === "string" ? { cwd: how } : how;
  const child = spawn(process.execPath, [spillwayCli, ...args], {
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    ...(opts.uid === undefined ? {} : { uid: opts.uid }),
    ...(opts.gid === undefined ? {} : { gid: opts.gid }),
    env: { ...process.env, SPILLWAY_DRAIN_DELAY_MS: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  return new Promise((resolve) =>
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}
