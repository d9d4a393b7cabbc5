import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * An OffloadBatch item whose output another call commits first (same key, same bytes) is
 * answered with that record. Its answer may encode a few bytes longer than the one the item
 * measured for the reply (another creation time), which must not turn it away ABORTED with
 * "nothing of it was committed".
 */
describe("an OffloadBatch item that another call commits first", () => {
  let t: TestServer;
  let clock = 1_700_000_000_000;
  let release: () => void = () => undefined;
  let reached: () => void = () => undefined;
  let holding = false;
  const arrived = new Promise<void>((r) => {
    reached = r;
  });
  const released = new Promise<void>((r) => {
    release = r;
  });
  // Holds the first commit of the record of "race": the batch item's.
  const holdRecord = async (keys: readonly string[]) => {
    if (!holding && keys.some((k) => k.endsWith("/h/res_race"))) {
      holding = true;
      reached();
      await released;
    }
  };
  const wrap = (base: Backend): Backend => ({
    ...base,
    put: async (key, body, opts) => {
      await holdRecord([key]);
      return base.put(key, body, opts);
    },
    ...(base.putMany === undefined
      ? {}
      : {
          putMany: async (keys, body, opts) => {
            await holdRecord(keys);
            return base.putMany?.(keys, body, opts) ?? [];
          },
        }),
  });
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: wrap, now: () => clock });
  });
  afterAll(() => t.stop());

  it("answers it with the committed record", async () => {
    const key = { tenant: "dev", runId: "r", callId: "race" };
    const data = new TextEncoder().encode("the same bytes\n");
    // Measured at a whole second (no nanos in its creation time)...
    const batch = t.raw().offloadBatch({ items: [{ header: { key }, data }] });
    await arrived;
    // ...and committed first by a call 999 ms later, whose creation time takes 6 bytes more.
    clock += 999;
    const first = await t.raw().offload(
      (async function* () {
        yield { msg: { case: "header" as const, value: { key } } };
        yield { msg: { case: "chunk" as const, value: data } };
      })(),
    );
    expect(first.created).toBe(true);
    release();
    const [result] = (await batch).results;
    expect(result?.result.case).toBe("offloaded");
    if (result?.result.case === "offloaded") {
      expect(result.result.value.created).toBe(false);
      expect(result.result.value.attachment?.handle).toBe("res_race");
    }
  });
});
