import { spawn } from "node:child_process";
import { createRequire } from "node:module";

/**
 * spillwayCli is the compiled `spillway` executable, `server/dist/entry.cjs` (the server
 * package's bin): test/global-setup/build.ts and `npm run bench` build it before anything runs
 * it.
 */
export const spillwayCli = createRequire(import.meta.url)
  .resolve("spillway/package.json")
  .replace(/package\.json$/, "dist/entry.cjs");

/** Most of the server's output kept for the error that reports an early exit. */
const keptOutputChars = 100_000;

/** How a process ended: its exit code, or the signal that ended it. */
export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** SpillwayProcess is one `spillway serve` process of the compiled CLI, as in a deployment. */
export interface SpillwayProcess {
  /** The URL the server logged that it listens on. */
  readonly url: string;
  /** The process id, for reading the process's /proc entries. */
  readonly pid: number;
  /** Every process of the server: `pid` and the workers that listened as it started. */
  pids(): number[];
  /** Settles once the process has exited. */
  readonly exited: Promise<ProcessExit>;
  /** Sends `signal` (default SIGKILL) unless the process has already exited. */
  kill(signal?: NodeJS.Signals): void;
  /** Sends SIGTERM (a graceful drain) and resolves once the process has exited. */
  stop(): Promise<void>;
  /** What the server has written to stdout (its log) so far, up to the first 100,000 characters. */
  output(): string;
}

/**
 * How many processes log that they listen: `--workers` among args, else SPILLWAY_WORKERS of the
 * environment the server gets (which spawnSpillway makes 1 unless told otherwise); with neither,
 * the first to listen is waited for.
 */
function workersOf(args: readonly string[], env: NodeJS.ProcessEnv): number {
  const at = args.lastIndexOf("--workers");
  return Number((at === -1 ? env.SPILLWAY_WORKERS : args[at + 1]) ?? 1);
}

/**
 * spawnSpillway starts `spillway serve --port 0 ...args` in its own process, with `env` over
 * this process's environment (and, with `opts.openFiles`, that limit on open files, set by
 * prlimit before the server starts; with `opts.umask`, that umask, set by a shell), and resolves once the server logs the URL it listens on: with
 * `--workers n`, once each of the n workers has (the first process hands a connection only to
 * a worker that listens, so a client connecting earlier could reach only some of them).
 *
 * Guarantees: the server gets a free loopback port; it runs as one process
 * (`SPILLWAY_WORKERS=1`, where `spillway serve` runs one a core) unless `args` say `--workers`
 * or `env` sets SPILLWAY_WORKERS, so `pid` is the process that serves, whose threads, heap and
 * death a test can read or cause; it stops without a drain delay
 * (`SPILLWAY_DRAIN_DELAY_MS=0`, which `env` may override), so `stop()` takes only as long as
 * the calls in flight; its stdout is read for as long as it runs,
 * so logging can never block it, and its stderr goes to this process's; if it exits (or cannot
 * start) before logging its URL, the promise rejects with what it wrote. The caller ends it
 * with `kill` or `stop`. `cli` runs another build of the executable, e.g. a packed install's.
 */
export function spawnSpillway(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  cli: string = spillwayCli,
  opts: { readonly openFiles?: number; readonly umask?: string } = {},
): Promise<SpillwayProcess> {
  const serverEnv = {
    ...process.env,
    SPILLWAY_DRAIN_DELAY_MS: "0",
    SPILLWAY_WORKERS: "1",
    ...env,
  };
  const command = [process.execPath, cli, "serve", "--port", "0", ...args];
  // prlimit execs the server in its own process, so the pid is the server's.
  const limited =
    opts.openFiles === undefined
      ? command
      : ["prlimit", `--nofile=${opts.openFiles}:${opts.openFiles}`, "--", ...command];
  // The shell execs the server, so the pid is still the server's.
  const [file, ...argv] =
    opts.umask === undefined
      ? limited
      : ["sh", "-c", `umask ${opts.umask} && exec "$@"`, "sh", ...limited];
  const child = spawn(file as string, argv, {
    env: serverEnv,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<ProcessExit>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const kill = (signal: NodeJS.Signals = "SIGKILL"): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  const workers = workersOf(args, serverEnv);
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      if (out.length > keptOutputChars) return;
      out += chunk.toString();
      // The listening lines alone (pino writes `pid` before `url`): a metrics endpoint logs its
      // own URL first.
      const listening = [...out.matchAll(/"pid":(\d+)[^\n]*"url":"([^"]+)"[^\n]* listening on /g)];
      const url = listening[0]?.[2];
      if (url !== undefined && listening.length >= workers && child.pid !== undefined) {
        const pids = [...new Set([child.pid, ...listening.map((m) => Number(m[1]))])];
        resolve({
          url,
          pid: child.pid,
          pids: () => pids,
          exited,
          kill,
          stop: async () => {
            kill("SIGTERM");
            await exited;
          },
          output: () => out,
        });
      }
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(new Error(`spillway serve exited (${code ?? signal}) before listening: ${out}`)),
    );
  });
}
