import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** Counts the write calls the server makes to its backend (a putMany is one). */
function countingWriteCalls(calls: { count: number }): (backend: Backend) => Backend {
  return (backend) => {
    const { putMany } = backend;
    return {
      ...backend,
      put(key, body, opts) {
        calls.count++;
        return backend.put(key, body, opts);
      },
      ...(putMany === undefined
        ? {}
        : {
            putMany(keys, body, opts) {
              calls.count++;
              return putMany.call(backend, keys, body, opts);
            },
          }),
    };
  };
}

describe("ForkRun of a large run (filesystem)", () => {
  let t: TestServer;
  afterEach(() => t.stop());

  it("copies every live record in packs, not one write a record", async () => {
    const calls = { count: 0 };
    t = await startTestServer({ wrapBackend: countingWriteCalls(calls) });
    const sdk = t.sdk();
    const count = 300;
    const payloads = Array.from({ length: count }, () => randomBytes(1024));
    await Promise.all(
      payloads.map((bytes, i) =>
        sdk.offload({ tenant: "dev", runId: "p", callId: `c${i}` }, bytes),
      ),
    );
    await sdk.offload({ tenant: "dev", runId: "p", callId: "big" }, "line\n".repeat(10_000));
    calls.count = 0;
    expect((await sdk.forkRun("p", "c")).forkedAttachments).toBe(BigInt(count + 1));
    // The meta, the owner reference and the marker, then the records 64 to a pack.
    expect(calls.count).toBeLessThanOrEqual(3 + Math.ceil((count + 1) / 64) + 1);
    const parent = [];
    for await (const a of sdk.listAll("p")) parent.push(a.sha256);
    const child = [];
    for await (const a of sdk.listAll("c")) child.push(a.sha256);
    expect(child).toEqual(parent);
    expect(child).toHaveLength(count + 1);
  });
});
