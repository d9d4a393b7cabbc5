import { createHash, randomBytes } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { codeOf } from "./support/code-of.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

/** Counts every object the server writes to its backend, whatever the call. */
function countingWrites(writes: string[]): (backend: Backend) => Backend {
  return (backend) => {
    const { putMany } = backend;
    return {
      ...backend,
      put(key, body, opts) {
        writes.push(key);
        return backend.put(key, body, opts);
      },
      ...(putMany === undefined
        ? {}
        : {
            putMany(keys, body, opts) {
              writes.push(...keys);
              return putMany.call(backend, keys, body, opts);
            },
          }),
    };
  };
}

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

describe.each(serviceBackends)("replayed offloads (%s)", (backendKind) => {
  let t: TestServer;
  const writes: string[] = [];
  beforeAll(async () => {
    t = await startTestServer({ backend: backendKind, wrapBackend: countingWrites(writes) });
  });
  afterAll(() => t.stop());
  const key = (callId: string) => ({ tenant: "dev", runId: "replays", callId });

  // 4 KiB is kept inline in the record (and goes in a batch); 300 KB is a blob, streamed.
  it.each([
    ["inline", 4096],
    ["blob", 300_000],
  ])(
    "a replay of the same bytes (%s) writes nothing and answers the committed record",
    async (_, size) => {
      const bytes = randomBytes(size);
      const first = await t.sdk().offloadResult(key(`same-${size}`), bytes);
      expect(first.created).toBe(true);
      const written = writes.length;
      for (let i = 0; i < 3; i++) {
        const again = await t.sdk().offloadResult(key(`same-${size}`), bytes);
        expect(again.created).toBe(false);
        expect(again.attachment).toEqual(first.attachment);
      }
      expect(writes.slice(written)).toEqual([]);
    },
  );

  it.each([
    ["inline", 4096],
    ["blob", 300_000],
  ])(
    "different bytes for a committed key (%s) are ALREADY_EXISTS, with nothing written",
    async (_, size) => {
      const bytes = randomBytes(size);
      const first = await t.sdk().offload(key(`diff-${size}`), bytes);
      const written = writes.length;
      expect(await codeOf(t.sdk().offload(key(`diff-${size}`), randomBytes(size)))).toBe(
        Code.AlreadyExists,
      );
      expect(writes.slice(written)).toEqual([]);
      expect(await t.sdk().stat("replays", first.handle)).toEqual(first);
    },
  );

  it.each([
    ["inline", 4096],
    ["blob", 300_000],
  ])("a replay still checks what its header declares (%s)", async (_, size) => {
    const bytes = randomBytes(size);
    await t.sdk().offload(key(`declared-${size}`), bytes);
    const wrongSha = sha(randomBytes(8));
    expect(
      await codeOf(t.sdk().offload(key(`declared-${size}`), bytes, { expectedSha256: wrongSha })),
    ).toBe(Code.DataLoss);
    expect(
      await codeOf(t.sdk().offload(key(`declared-${size}`), bytes, { expectedSha256: sha(bytes) })),
    ).toBeUndefined();
  });

  it("many replays at once each answer the one committed record", async () => {
    const payloads = Array.from({ length: 40 }, () => randomBytes(2048));
    const firsts = await Promise.all(
      payloads.map((bytes, i) => t.sdk().offloadResult(key(`many-${i}`), bytes)),
    );
    const written = writes.length;
    const again = await Promise.all(
      payloads.map((bytes, i) => t.sdk().offloadResult(key(`many-${i}`), bytes)),
    );
    expect(again.map((r) => r.created)).toEqual(payloads.map(() => false));
    expect(again.map((r) => r.attachment)).toEqual(firsts.map((r) => r.attachment));
    expect(writes.slice(written)).toEqual([]);
  });
});
