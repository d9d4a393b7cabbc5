import { spawnSync } from "node:child_process";
import { createSpillwayClient } from "@spillway/client";
import { afterEach, describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway, spillwayCli } from "./support/spawn-spillway.js";

/**
 * A server started under a low limit on open files (`ulimit -n 128`, as a container or a
 * systemd unit may set) still serves one client's calls one after another: the descriptors the
 * filesystem backend keeps for later reads are bounded by the limit, not only by their count.
 */
describe("spillway serve under a low open-file limit", () => {
  let server: SpillwayProcess | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it("answers 150 offloads and reads in a row at 128 open files, none EMFILE", async () => {
    server = await spawnSpillway(
      ["--data-dir", scratchDir("open-files"), "--workers", "1"],
      {},
      spillwayCli,
      { openFiles: 128 },
    );
    const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    const failures: string[] = [];
    for (let i = 0; i < 150; i++) {
      try {
        const key = { tenant: "dev", runId: `run-${i % 5}`, callId: `call-${i}` };
        const att = await spillway.offload(key, `${"line of output\n".repeat(3_000)}${i}\n`);
        const window = await spillway.readToolOutput({
          runId: key.runId,
          handle: att.handle,
          window: { case: "lines", value: { offset: 2_999n, limit: 2 } },
        });
        if (!window.rendered.includes(`\t${i}`)) failures.push(`${i}: ${window.rendered}`);
      } catch (err) {
        failures.push(`${i}: ${String(err)}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it("refuses to start under a limit too low to load it, naming the limit, with no stack", () => {
    const started = spawnSync(
      "prlimit",
      ["--nofile=40:40", "--", process.execPath, spillwayCli, "serve", "--port", "0"],
      {
        encoding: "utf8",
        timeout: 30_000,
        env: { ...process.env, SPILLWAY_DATA_DIR: scratchDir("open-files-low") },
      },
    );
    expect(started.status).toBe(1);
    expect(started.stderr).toContain(
      "spillway: the limit on open files is 40 (ulimit -n); spillway needs at least 128 to start",
    );
    expect(started.stderr).not.toMatch(/\n\s+at /);
  });
});
