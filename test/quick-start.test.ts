import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * The README's quick start, for real: the compiled `spillway serve` on its embedded default
 * (filesystem backend, loopback), a 50 MB offload, line 400,000 read back, a clean SIGTERM.
 */
describe("quick start: spillway serve", () => {
  let server: SpillwayProcess | undefined;
  let url: string;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "spillway-cli-"));
    server = await spawnSpillway(["--data-dir", join(dataDir, "data")]);
    url = server.url;
  });

  afterAll(async () => {
    server?.kill();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("offloads 50 MB and reads line 400,000 back", async () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const lines = Array.from(
      { length: 1_000_000 },
      (_, i) => `${String(i + 1).padStart(7, "0")} abcdefghijklmnopqrstuvwxyz0123456789abcdef`,
    );
    const payload = Buffer.from(`${lines.join("\n")}\n`);
    expect(payload.byteLength).toBeGreaterThanOrEqual(50_000_000);
    const spillway = createSpillwayClient({ baseUrl: url });
    const att = await spillway.offload({ tenant: "dev", runId: "qs", callId: "big" }, payload);
    expect(att.sha256).toBe(createHash("sha256").update(payload).digest("hex"));
    expect(att.lineCount).toBe(1_000_000n);

    const win = await spillway.readToolOutput({
      runId: "qs",
      handle: att.handle,
      window: { case: "lines", value: { offset: 399_999n, limit: 1 } },
    });
    expect(win.rendered).toContain(`400000\t${lines[399_999]}\n`);
    expect(win.trailer?.nextOffset).toBe(400_000n);
    expect((await stat(join(dataDir, "data"))).mode & 0o777).toBe(0o700);
  });

  it("runs the README's example against it", () => {
    const out = execFileSync(process.execPath, [join(root, "examples/quick-start.mjs"), url], {
      encoding: "utf8",
    });
    expect(out).toContain("[res_call-1] 28888895 bytes · 1000000 lines\n");
    expect(out).toContain("[res_call-1] lines 400000-400002 of 1000000");
    expect(out).toContain("400000\tline 400000 of the build log\n");
  });

  it("drains and exits 0 on SIGTERM", async () => {
    server?.kill("SIGTERM");
    expect(await server?.exited).toEqual({ code: 0, signal: null });
  });
});
