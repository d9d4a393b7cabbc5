import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storeGates } from "./support/store-gates.js";
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
  // Holds the first commit of the record of "race": the batch item's.
  const gates = storeGates();
  const commit = gates.at("/h/res_race");
  beforeAll(async () => {
    t = await startTestServer({ backend: "filesystem", wrapBackend: gates.wrap, now: () => clock });
  });
  afterAll(() => t.stop());

  it("answers it with the committed record", async () => {
    const key = { tenant: "dev", runId: "r", callId: "race" };
    const data = new TextEncoder().encode("the same bytes\n");
    // Measured at a whole second (no nanos in its creation time)...
    const batch = t.raw().offloadBatch({ items: [{ header: { key }, data }] });
    await commit.reached;
    // ...and committed first by a call 999 ms later, whose creation time takes 6 bytes more.
    clock += 999;
    const first = await t.raw().offload(
      (async function* () {
        yield { msg: { case: "header" as const, value: { key } } };
        yield { msg: { case: "chunk" as const, value: data } };
      })(),
    );
    expect(first.created).toBe(true);
    commit.open();
    const [result] = (await batch).results;
    expect(result?.result.case).toBe("offloaded");
    if (result?.result.case === "offloaded") {
      expect(result.result.value.created).toBe(false);
      expect(result.result.value.attachment?.handle).toBe("res_race");
    }
  });
});
