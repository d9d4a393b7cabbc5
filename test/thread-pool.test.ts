import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** Threads of a process now: the main thread, V8's workers, libuv's pool once it started. */
async function threadCount(pid: number): Promise<number> {
  return (await readdir(`/proc/${pid}/task`)).length;
}

/** Starts `spillway serve` with env and makes it use libuv's pool (a filesystem offload). */
async function servedWithPool(dir: string, env: NodeJS.ProcessEnv): Promise<SpillwayProcess> {
  const server = await spawnSpillway(["--data-dir", dir], env);
  const client = createSpillwayClient({ baseUrl: server.url });
  await client.offload({ tenant: "dev", runId: "pool", callId: "c" }, Buffer.from("x\n"));
  return server;
}

/**
 * The `spillway` executable sizes libuv's pool before Node starts it (server/entry.cts): 16
 * threads unless the operator set UV_THREADPOOL_SIZE, whose value wins.
 */
describe("spillway serve: libuv's thread pool", () => {
  const dir = scratchDir("spillway-pool-");
  const servers: SpillwayProcess[] = [];

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it("runs 16 pool threads by default and the operator's count when set", async () => {
    const byDefault = await servedWithPool(join(dir, "a"), { UV_THREADPOOL_SIZE: undefined });
    servers.push(byDefault);
    const four = await servedWithPool(join(dir, "b"), { UV_THREADPOOL_SIZE: "4" });
    servers.push(four);
    const six = await servedWithPool(join(dir, "c"), { UV_THREADPOOL_SIZE: "6" });
    servers.push(six);
    // Everything but the pool is the same in the three processes.
    expect((await threadCount(six.pid)) - (await threadCount(four.pid))).toBe(2);
    expect((await threadCount(byDefault.pid)) - (await threadCount(four.pid))).toBe(12);
  });
});
