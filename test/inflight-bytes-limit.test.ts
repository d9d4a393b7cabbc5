import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { OffloadRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { readBack, sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const KiB = 1024;
const MiB = 1024 * KiB;

describe("bytes in flight per server", () => {
  let t: TestServer;
  beforeAll(async () => {
    // One offload reserves 1 MiB + 16 KiB and one read 1 MiB: only one of them fits at a time.
    t = await startTestServer({
      limits: { maxChunkBytes: MiB, inlineBytes: 16 * KiB },
      maxInflightBytes: 1.5 * MiB,
    });
  });
  afterAll(() => t.stop());

  it("refuses offloads and reads past max_inflight_bytes with RESOURCE_EXHAUSTED, then serves again", async () => {
    const kept = "kept line\n".repeat(50_000);
    await t.sdk().offload({ tenant: "dev", runId: "r", callId: "kept" }, kept);

    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let sent: () => void = () => {};
    const chunkSent = new Promise<void>((resolve) => {
      sent = resolve;
    });
    const held = new Uint8Array(100_000).fill(0x62);
    const stalled = t.raw().offload(
      (async function* () {
        yield create(OffloadRequestSchema, {
          msg: { case: "header", value: { key: { tenant: "dev", runId: "r", callId: "held" } } },
        });
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: held } });
        sent();
        await gate;
      })(),
    );
    let refused: ConnectError | undefined;
    try {
      await chunkSent;
      // The stream is sent; the server admits it asynchronously, so ask until it refuses.
      for (let i = 0; i < 250 && refused === undefined; i++) {
        refused = await t
          .sdk()
          .readToolOutput({ runId: "r", handle: "res_kept" })
          .then(
            () => undefined,
            (err: unknown) => ConnectError.from(err),
          );
        if (refused === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(refused?.code).toBe(Code.ResourceExhausted);
      expect(refused?.rawMessage).toBe(
        `${MiB + 16 * KiB} of max_inflight_bytes ${1.5 * MiB} are held by calls in flight on this server; a ReadToolOutput needs ${MiB} more; retry shortly or on another replica`,
      );
      expect(
        await codeOf(t.sdk().offload({ tenant: "dev", runId: "r", callId: "second" }, "x")),
      ).toBe(Code.ResourceExhausted);
      // Calls that hold no payload are not counted.
      expect((await t.sdk().stat("r", "res_kept")).sha256).toBe(sha256(kept));
    } finally {
      release();
    }
    const committed = await stalled;
    expect(committed.attachment?.sha256).toBe(sha256(held));

    // Everything reserved was given back: the refused offload goes through now.
    await t.sdk().offload({ tenant: "dev", runId: "r", callId: "second" }, "x");
    expect(sha256(await readBack(t.sdk(), "r", "res_kept"))).toBe(sha256(kept));
    expect(sha256(await readBack(t.sdk(), "r", "res_held"))).toBe(sha256(held));
  });
});
