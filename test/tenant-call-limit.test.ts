import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { OffloadRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("calls in flight per tenant", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: "memory",
      // The test server writes `<hash> <tenant>` lines; the tenant field carries the attributes.
      tokens: { a: "tenant-a", b: "tenant-b", c: "tenant-c max_calls=1" },
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
    const stalled = (callId: string, token = "a", tenant = "tenant-a") =>
      t.raw(token).offload(
        (async function* () {
          yield create(OffloadRequestSchema, {
            msg: { case: "header", value: { key: { tenant, runId: "r", callId } } },
          });
          yield create(OffloadRequestSchema, { msg: { case: "chunk", value: new Uint8Array(10) } });
          headersSent++;
          if (headersSent === 3) bothSent();
          await gate;
        })(),
      );
    const first = stalled("one");
    const second = stalled("two");
    // Tenant c's own max_calls of 1 lowers the server's 2 for it.
    const third = stalled("three", "c", "tenant-c");
    await sent;
    // Both streams are sent; the server admits them asynchronously, so ask until it refuses.
    let refused: Code | undefined;
    for (let i = 0; i < 250 && refused !== Code.ResourceExhausted; i++) {
      refused = await codeOf(t.raw("a").getServerInfo({}));
      if (refused !== Code.ResourceExhausted) await new Promise((r) => setTimeout(r, 20));
    }
    expect(refused).toBe(Code.ResourceExhausted);
    expect((await t.raw("b").getServerInfo({})).backend).toBe("memory");
    let refusedC: ConnectError | undefined;
    for (let i = 0; i < 250 && refusedC === undefined; i++) {
      refusedC = await t
        .raw("c")
        .getServerInfo({})
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      if (refusedC === undefined) await new Promise((r) => setTimeout(r, 20));
    }
    expect(refusedC?.code).toBe(Code.ResourceExhausted);
    expect(refusedC?.rawMessage).toBe(
      'tenant "tenant-c" has 1 calls in flight on this server; the limit is 1',
    );
    release();
    await Promise.all([first, second, third]);
    expect((await t.raw("a").getServerInfo({})).backend).toBe("memory");
  });
});
