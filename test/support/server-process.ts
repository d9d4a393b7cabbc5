import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { ListBucketsCommand } from "@aws-sdk/client-s3";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ObjectServer, ObjectServerInfo } from "./object-server.js";
import { createTestS3Client } from "./s3-client.js";
import { type Probe, waitFor } from "./wait-for.js";

/** ObjectServerSpec describes how to run one object server process and when it is ready. */
export interface ObjectServerSpec extends ObjectServerInfo {
  /** Private temp dir: holds `server.log`; deleted by stop(). */
  dir: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  /** Resolves true once the server serves requests; defaults to a successful ListBuckets. */
  ready?: Probe;
  readyTimeoutMs: number;
}

const killGraceMs = 5_000;
const running = new Set<ChildProcess>();
let cleanupInstalled = false;

/**
 * launchObjectServer spawns `spec.command` in its own process group (output appended to
 * `<dir>/server.log`) and resolves once it is ready. If it exits or is not ready in time, the
 * process is killed, the dir deleted, and the rejection carries the log tail.
 */
export async function launchObjectServer(spec: ObjectServerSpec): Promise<ObjectServer> {
  const { dir, command, args, env, ready, readyTimeoutMs, ...info } = spec;
  const logPath = join(dir, "server.log");
  const probe = ready ?? listBucketsProbe(info);
  let child: ChildProcess | undefined;
  let stopped = false;

  const halt = async (): Promise<void> => {
    const current = child;
    child = undefined;
    if (current !== undefined) {
      await terminate(current);
    }
  };

  const start = async (): Promise<void> => {
    const log = await open(logPath, "a");
    try {
      const proc = spawn(command, args, {
        cwd: dir,
        env: { ...process.env, ...env },
        stdio: ["ignore", log.fd, log.fd],
        detached: true,
      });
      child = proc;
      track(proc);
      let spawnError: Error | undefined;
      proc.once("error", (err) => {
        spawnError = err;
      });
      await waitFor(probe, readyTimeoutMs, {
        abortReason: () => {
          if (spawnError !== undefined) {
            return `${info.kind}: cannot run ${command}: ${spawnError.message}`;
          }
          if (proc.exitCode !== null || proc.signalCode !== null) {
            return `${info.kind}: ${command} exited (${proc.exitCode ?? proc.signalCode}) before it was ready`;
          }
          return undefined;
        },
      });
    } catch (err) {
      await halt();
      const tail = await logTail(logPath);
      throw new ConnectError(
        `${ConnectError.from(err).rawMessage}\n--- ${logPath} (tail) ---\n${tail}`,
        ConnectError.from(err).code,
      );
    } finally {
      await log.close();
    }
  };

  try {
    await start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }

  return {
    ...info,
    async stop() {
      if (stopped) {
        return;
      }
      stopped = true;
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
    async restart() {
      if (stopped) {
        throw new ConnectError(`${info.kind} server was stopped for good`, Code.FailedPrecondition);
      }
      await halt();
      await start();
    },
    async pause() {
      if (stopped) {
        throw new ConnectError(`${info.kind} server was stopped for good`, Code.FailedPrecondition);
      }
      await halt();
    },
    pid() {
      return child?.pid;
    },
  };
}

/** listBucketsProbe is ready once the server answers an authenticated ListBuckets. */
export function listBucketsProbe(info: ObjectServerInfo): Probe {
  const client = createTestS3Client(info);
  return async () => {
    await client.send(new ListBucketsCommand({}), { abortSignal: AbortSignal.timeout(2_000) });
    return true;
  };
}

// A test worker that dies or is killed without stopping its servers must not leave them behind:
// servers run detached in their own process groups, so nothing else would reap them.
function track(child: ChildProcess): void {
  if (!cleanupInstalled) {
    cleanupInstalled = true;
    process.once("exit", killAllRunning);
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
      process.once(signal, () => {
        killAllRunning();
        // Keep the default outcome (death by that signal) unless someone else handles it.
        if (process.listenerCount(signal) === 0) {
          process.kill(process.pid, signal);
        }
      });
    }
  }
  running.add(child);
  child.once("exit", () => running.delete(child));
}

function killAllRunning(): void {
  for (const child of running) {
    killGroup(child, "SIGKILL");
  }
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) {
    return;
  }
  const exited = once(child, "exit");
  killGroup(child, "SIGTERM");
  const timer = setTimeout(() => killGroup(child, "SIGKILL"), killGraceMs);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
  // The leader is gone; helpers it forked in the group must not outlive it.
  killGroup(child, "SIGKILL");
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) {
    return;
  }
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

async function logTail(path: string, lines = 40): Promise<string> {
  try {
    const text = await readFile(path, "utf8");
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  } catch (err) {
    return `(no log: ${String(err)})`;
  }
}
