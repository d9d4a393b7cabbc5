import { appendFileSync, readdirSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import type { ReadToolOutputInit } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** The payload file of a call in run "r", found on disk under the test server's store. */
function blobFile(t: TestServer, callId: string): string {
  const dir = join(t.dataDir, "store", "t", "dev", "r", "r", "b", callId);
  const name = readdirSync(dir).find((n) => !n.endsWith(".idx"));
  if (name === undefined) throw new Error(`no blob for ${callId}`);
  return join(dir, name);
}

/**
 * A payload changed on disk behind the server's back (cut short by a bad restore or a hand with
 * write access to the data directory, or grown by one) is reported, never shown as something
 * else: a window never says more bytes or lines follow that the store cannot give.
 */
describe("a blob changed behind the server's back", () => {
  let t: TestServer;
  const payload = Array.from({ length: 20_000 }, (_, i) => `line ${i}\n`).join("");
  const read = (handle: string, window: Omit<ReadToolOutputInit, "runId" | "handle">) =>
    t.sdk().readToolOutput({ runId: "r", handle, ...window });

  beforeAll(async () => {
    t = await startTestServer({ limits: { indexStride: 64 } });
    await t.sdk().offload({ tenant: "dev", runId: "r", callId: "cut" }, payload);
    await t.sdk().offload({ tenant: "dev", runId: "r", callId: "grown" }, payload);
    truncateSync(blobFile(t, "cut"), 100_000);
    appendFileSync(blobFile(t, "grown"), "EXTRA LINE APPENDED\n");
  });
  afterAll(() => t.stop());

  it("cut short: every window that reaches past the cut is DATA_LOSS", async () => {
    const windows: Omit<ReadToolOutputInit, "runId" | "handle">[] = [
      { window: { case: "bytes", value: {} } },
      { window: { case: "bytes", value: { offset: 150_000n, limit: 100n } } },
      { window: { case: "lines", value: { offset: 15_000n, limit: 2 } } },
      { window: { case: "lines", value: { offset: 0n, limit: 2, fromEnd: true } } },
      { window: { case: "search", value: { pattern: "line 1999" } } },
    ];
    for (const window of windows) {
      expect([window.window?.case, await codeOf(read("res_cut", window))]).toEqual([
        window.window?.case,
        Code.DataLoss,
      ]);
    }
    // Before the cut it still reads.
    const head = await read("res_cut", {
      window: { case: "lines", value: { offset: 0n, limit: 2 } },
    });
    expect(head.rendered).toContain("line 1");
  });

  it("grown: windows show the recorded bytes only", async () => {
    const all = await read("res_grown", { window: { case: "bytes", value: {} } });
    const bytes = Buffer.concat(
      all.frames.flatMap((f) =>
        f.frame.case === "content" && f.frame.value.body.case === "data"
          ? [Buffer.from(f.frame.value.body.value)]
          : [],
      ),
    );
    expect(bytes.toString()).toBe(payload);
    const found = await read("res_grown", {
      window: { case: "search", value: { pattern: "EXTRA" } },
    });
    expect(found.rendered).not.toContain("APPENDED");
    expect(found.frames.some((f) => f.frame.case === "content")).toBe(false);
    const tail = await read("res_grown", {
      window: { case: "lines", value: { offset: 0n, limit: 1, fromEnd: true } },
    });
    expect(tail.rendered).toContain("line 19999");
    expect(tail.rendered).not.toContain("EXTRA");
  });
});
