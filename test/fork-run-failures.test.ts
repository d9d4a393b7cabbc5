import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { storeGates } from "./support/store-gates.js";
import { startTestServer, type TestServer } from "./support/test-server.js";
import { waitFor } from "./support/wait-for.js";

/**
 * A ForkRun that does not finish leaves no child: a partial one listed part of the parent's
 * outputs as if it were the whole, and forking again answered ALREADY_EXISTS.
 */
describe("a ForkRun that fails part way", () => {
  let t: TestServer;
  const gates = storeGates();
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: gates.wrap });
  });
  afterAll(() => t.stop());

  const handles = async (runId: string) => {
    const out: string[] = [];
    for await (const a of t.sdk().listAll(runId)) out.push(a.handle);
    return out.sort();
  };

  it("removes what it copied when its deadline passes, and forking again copies every output", async () => {
    const calls = Array.from({ length: 200 }, (_, i) => `c${String(i).padStart(3, "0")}`);
    for (const callId of calls) {
      await t.sdk().offload({ tenant: "dev", runId: "parent", callId }, `output of ${callId}\n`);
    }
    // The fork's later records wait in the store until its deadline has passed.
    const late = gates.at("/r/child/h/res_c150");
    const fork = codeOf(t.sdk().forkRun("parent", "child", { timeoutMs: 500 }));
    await late.reached;
    expect(await fork).toBe(Code.DeadlineExceeded);
    late.open();
    await waitFor(async () => (await handles("child")).length === 0, 10_000);
    const again = await t.sdk().forkRun("parent", "child");
    expect(again.forkedAttachments).toBe(200n);
    expect(await handles("child")).toEqual(calls.map((c) => `res_${c}`));
  });
});
