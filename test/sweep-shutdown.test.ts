import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, describe, expect, it } from "vitest";
import { spawnSpillway, spillwayCli } from "./support/spawn-spillway.js";

const records = 5_000;
const graceMs = 1_500;

describe("sweep and shutdown", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it("a server with a sweep in progress exits on SIGTERM within its grace period", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-sweep-term-"));
    dirs.push(dir);
    const store = join(dir, "store");
    // Enough records that a whole sweep takes a while, written by a first server.
    const writer = await spawnSpillway(["--data-dir", store, "--sweep-interval-ms", "3600000"]);
    try {
      const client = createSpillwayClient({ baseUrl: writer.url });
      let next = 0;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next < records) {
            const i = next++;
            await client.offload({ tenant: "dev", runId: `r${i % 4}`, callId: `c${i}` }, `${i}\n`);
          }
        }),
      );
    } finally {
      await writer.stop();
    }

    // Sweeps start every 20 ms, so one is always running or about to.
    const child = spawn(
      process.execPath,
      [
        spillwayCli,
        "serve",
        "--port",
        "0",
        "--data-dir",
        store,
        "--sweep-interval-ms",
        "20",
        "--grace-ms",
        String(graceMs),
        // No balancer polls this server: the bound is the grace period alone.
        "--drain-delay-ms",
        "0",
      ],
      {
        env: { ...process.env, SPILLWAY_LOG_LEVEL: "debug" },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
    let termAt: number | undefined;
    const terminate = () => {
      if (termAt !== undefined) return;
      termAt = performance.now();
      child.kill("SIGTERM");
    };
    for await (const line of createInterface({ input: child.stdout })) {
      // At the first sweep's start, or soon after listening: sweeps then run back to back.
      if (line.includes('"msg":"sweep started"')) terminate();
      else if (line.includes("listening on")) setTimeout(terminate, 300);
    }
    const [code] = await exited;
    expect(termAt).toBeDefined();
    expect(code).toBe(0);
    // The drain itself has nothing to wait for: no call is in flight.
    expect(performance.now() - (termAt ?? 0)).toBeLessThan(graceMs);
  });
});
