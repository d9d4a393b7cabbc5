import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient, isTransientError } from "@spillway/client";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "./support/free-port.js";
import { attemptCounter, cutFirstOffload } from "./support/offload-cut.js";
import { sha256 } from "./support/read-back.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** Large enough that the upload is still going when its server dies. */
const payload = randomBytes(64 * 1024 * 1024);
const digest = sha256(payload);
const tenant = "dev";

/**
 * The pids among `pids` holding an established TCP connection whose local port is `port`: the
 * processes serving a client of that port (/proc/net/tcp names the socket's inode; the
 * process's fd links name the inodes it holds).
 */
function servingPids(pids: readonly number[], port: number): number[] {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const local = fields[1]?.split(":").at(-1);
      // State 01 is ESTABLISHED; field 9 is the socket's inode.
      if (local !== undefined && Number.parseInt(local, 16) === port && fields[3] === "01") {
        inodes.add(fields[9] ?? "");
      }
    }
  }
  return pids.filter((pid) => {
    try {
      return readdirSync(`/proc/${pid}/fd`).some((fd) => {
        const link = (() => {
          try {
            return readlinkSync(`/proc/${pid}/fd/${fd}`);
          } catch {
            return "";
          }
        })();
        return inodes.has(link.replace(/^socket:\[(\d+)\]$/, "$1"));
      });
    } catch {
      return false;
    }
  });
}

/**
 * A server process killed with SIGKILL in the middle of an Offload, straight under the SDK (no
 * proxy in between): the SDK must see UNAVAILABLE, the verdict docs/operations.md#retries gives
 * a replica that died, and repeat the idempotent offload, not report CANCELED as if its caller
 * had cancelled.
 */
describe("an SDK call whose server process is killed mid-call", () => {
  const root = scratchDir("spillway-replica-killed-");
  let servers: SpillwayProcess[] = [];
  let n = 0;

  afterEach(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    servers = [];
  });

  const serve = async (args: string[]) => {
    const server = await spawnSpillway([...args, "--grace-ms", "1000"]);
    servers.push(server);
    return server;
  };

  it("repeats an offload whose one server was killed mid-upload, once it is back", async () => {
    const port = await freePort();
    const args = ["--port", String(port), "--data-dir", `${root}/store-${n++}`];
    let server = await serve(args);
    const { interceptor, count } = attemptCounter();
    const client = createSpillwayClient({
      baseUrl: server.url,
      interceptors: [
        interceptor,
        cutFirstOffload(
          async () => {
            server.kill("SIGKILL");
            await server.exited;
          },
          // The same port and data directory: what a supervisor restarting it gives.
          async () => {
            server = await serve(args);
          },
        ),
      ],
    });
    const res = await client.offloadResult({ tenant, runId: "killed", callId: "big" }, payload);
    expect(res.attachment.sha256).toBe(digest);
    expect(count.get("Offload")).toBe(2);
    const records = [];
    for await (const att of client.listAll("killed")) records.push([att.handle, att.sha256]);
    expect(records).toEqual([[res.attachment.handle, digest]]);
  }, 60_000);

  it("repeats an offload whose worker was killed mid-upload on the worker that is left", async () => {
    const server = await serve(["--workers", "2", "--data-dir", `${root}/store-${n++}`]);
    const port = Number(new URL(server.url).port);
    const workers = server.pids().filter((pid) => pid !== server.pid);
    let killed: number[] = [];
    const { interceptor, count } = attemptCounter();
    const client = createSpillwayClient({
      baseUrl: server.url,
      interceptors: [
        interceptor,
        cutFirstOffload(async () => {
          killed = servingPids(workers, port);
          for (const pid of killed) process.kill(pid, "SIGKILL");
        }),
      ],
    });
    const res = await client.offloadResult({ tenant, runId: "worker", callId: "big" }, payload);
    expect(killed).toHaveLength(1);
    expect(res.attachment.sha256).toBe(digest);
    expect(count.get("Offload")).toBe(2);
  }, 60_000);

  it("fails UNAVAILABLE, a transient error, not CANCELED when no server comes back", async () => {
    const server = await serve(["--data-dir", `${root}/store-${n++}`]);
    const client = createSpillwayClient({
      baseUrl: server.url,
      retry: { maxAttempts: 1 },
      interceptors: [
        cutFirstOffload(async () => {
          server.kill("SIGKILL");
          await server.exited;
        }),
      ],
    });
    const err = await client.offload({ tenant, runId: "gone", callId: "big" }, payload).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Unavailable);
    expect(err !== undefined && isTransientError(err)).toBe(true);
  }, 60_000);
});
