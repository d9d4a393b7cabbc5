import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** SpawnedServer is `spillway serve` running in its own process, as in a deployment. */
export interface SpawnedServer {
  readonly url: string;
  /** The server's process id, to read its memory from /proc. */
  readonly pid: number;
  /** Sends SIGTERM and waits for the process to exit. */
  stop(): Promise<void>;
}

const cli = fileURLToPath(new URL("../server/cli.js", import.meta.url));

/**
 * spawnServer starts the compiled CLI with `args` on a free loopback port and resolves with
 * its URL once it logs that it listens. The server gets its own process (and core), so a
 * benchmark measures it the way clients meet it, not sharing one event loop with the client.
 */
export function spawnServer(args: string[], env: NodeJS.ProcessEnv = {}): Promise<SpawnedServer> {
  const child: ChildProcess = spawn(process.execPath, [cli, "serve", "--port", "0", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /"url":"([^"]+)"/.exec(out);
      if (match?.[1] !== undefined) {
        resolve({
          url: match[1],
          pid: child.pid ?? -1,
          stop: async () => {
            child.kill("SIGTERM");
            await exited;
          },
        });
      }
    });
    child.once("exit", (code) => reject(new Error(`spillway serve exited (${code}): ${out}`)));
  });
}
