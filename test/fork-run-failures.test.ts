import { Code, ConnectError } from "@connectrpc/connect";
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

  it("refuses a fork into the id while a failed fork's cleanup runs, then forks afresh", async () => {
    for (let i = 0; i < 50; i++) {
      await t.sdk().offload({ tenant: "dev", runId: "parent2", callId: `c${i}` }, `output ${i}\n`);
    }
    const late = gates.at("/r/child2/h/res_c40");
    const fork = codeOf(t.sdk().forkRun("parent2", "child2", { ttlSeconds: 600, timeoutMs: 500 }));
    await late.reached;
    expect(await fork).toBe(Code.DeadlineExceeded);
    // The cleanup is held at the child's references to the parent, near its end.
    const cleanup = gates.at("/r/child2/o/");
    late.open();
    await cleanup.reached;
    const meanwhile = await t
      .sdk()
      .forkRun("parent2", "child2", { ttlSeconds: 600 })
      .then(
        () => undefined,
        (err: unknown) => ConnectError.from(err),
      );
    expect(meanwhile?.code).toBe(Code.AlreadyExists);
    expect(meanwhile?.rawMessage).toBe('run "child2" already exists');
    cleanup.open();
    await waitFor(async () => (await handles("child2")).length === 0, 10_000);
    await waitFor(
      async () =>
        await t
          .sdk()
          .forkRun("parent2", "child2", { ttlSeconds: 600 })
          .then(
            (r) => r.forkedAttachments === 50n,
            () => false,
          ),
      10_000,
    );
    expect(await handles("child2")).toHaveLength(50);
  });
});
