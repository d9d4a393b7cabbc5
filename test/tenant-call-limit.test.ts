import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OffloadRequestSchema } from "../clients/ts/src/gen/spillway/v1/spillway_pb.js";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("calls in flight per tenant", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: "memory",
      tokens: { a: "tenant-a", b: "tenant-b" },
      maxCallsPerTenant: 2,
    });
  });
  afterAll(() => t.stop());

  it("refuses a tenant's call past the limit with RESOURCE_EXHAUSTED, others unaffected", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let headersSent = 0;
    let bothSent: () => void = () => {};
    const sent = new Promise<void>((resolve) => {
      bothSent = resolve;
    });
    const stalled = (callId: string) =>
      t.raw("a").offload(
        (async function* () {
          yield create(OffloadRequestSchema, {
            msg: { case: "header", value: { key: { tenant: "tenant-a", runId: "r", callId } } },
          });
          yield create(OffloadRequestSchema, { msg: { case: "chunk", value: new Uint8Array(10) } });
          headersSent++;
          if (headersSent === 2) bothSent();
          await gate;
        })(),
      );
    const first = stalled("one");
    const second = stalled("two");
    await sent;
    // Both streams are sent; the server admits them asynchronously, so ask until it refuses.
    let refused: Code | undefined;
    for (let i = 0; i < 250 && refused !== Code.ResourceExhausted; i++) {
      refused = await codeOf(t.raw("a").getServerInfo({}));
      if (refused !== Code.ResourceExhausted) await new Promise((r) => setTimeout(r, 20));
    }
    expect(refused).toBe(Code.ResourceExhausted);
    expect((await t.raw("b").getServerInfo({})).backend).toBe("memory");
    release();
    await Promise.all([first, second]);
    expect((await t.raw("a").getServerInfo({})).backend).toBe("memory");
  });
});
