import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { OffloadRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashToken } from "../server/src/auth.js";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { blobPrefix } from "../server/src/keys.js";
import { startSpillwayServer } from "../server/src/server.js";
import { codeOf } from "./support/code-of.js";
import { readBack, sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (err: unknown) => ConnectError.from(err),
  );

describe("max bytes per run", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ limits: { maxRunBytes: 100_000 } });
  });
  afterAll(() => t.stop());

  it("refuses an offload past max_run_bytes with RESOURCE_EXHAUSTED and keeps what was committed", async () => {
    const sdk = t.sdk();
    const key = (callId: string) => ({ tenant: "dev", runId: "r", callId });
    const first = "a".repeat(40_000);
    const second = "b".repeat(50_000);
    await sdk.offload(key("one"), first);
    await sdk.offload(key("two"), second);

    const refused = await errorOf(sdk.offload(key("three"), "c".repeat(20_000)));
    expect(refused?.code).toBe(Code.ResourceExhausted);
    expect(refused?.rawMessage).toBe(
      'run "r" holds 90000 bytes; storing 20000 more would exceed max_run_bytes 100000',
    );
    const declared = await errorOf(
      sdk.offload(key("four"), "d".repeat(20_000), { expectedSize: 20_000n }),
    );
    expect(declared?.code).toBe(Code.ResourceExhausted);
    expect(declared?.rawMessage).toBe(
      'run "r" holds 90000 bytes; storing 20000 more would exceed max_run_bytes 100000',
    );

    // Nothing refused became visible, and no blob of a refused upload was left behind.
    expect(await codeOf(sdk.stat("r", "res_three"))).toBe(Code.PermissionDenied);
    expect(await codeOf(sdk.stat("r", "res_four"))).toBe(Code.PermissionDenied);
    expect((await t.backend.list(blobPrefix("dev", "r"))).keys).toHaveLength(2);

    // An identical retry of a committed offload is a replay, never refused.
    const replay = await sdk.offloadResult(key("one"), first);
    expect(replay.created).toBe(false);
    // The run still takes what fits, other runs are unaffected, committed bytes are intact.
    await sdk.offload(key("small"), "e".repeat(10_000));
    await sdk.offload({ tenant: "dev", runId: "other", callId: "one" }, "f".repeat(99_000));
    expect(sha256(await readBack(sdk, "r", "res_one"))).toBe(sha256(first));
    expect(sha256(await readBack(sdk, "r", "res_two"))).toBe(sha256(second));
  });

  it("counts every attempt of a call, and replays of an attempt are never refused", async () => {
    const sdk = t.sdk();
    const key = (attempt: number) => ({ tenant: "dev", runId: "attempts", callId: "c", attempt });
    await sdk.offload(key(1), "a".repeat(40_000));
    const second = "b".repeat(40_000);
    await sdk.offload(key(2), second);
    // Attempt 3 would make 110,000 bytes: the retries count as outputs of their own.
    const refused = await errorOf(sdk.offload(key(3), "c".repeat(30_000)));
    expect(refused?.code).toBe(Code.ResourceExhausted);
    expect(refused?.rawMessage).toBe(
      'run "attempts" holds 80000 bytes; storing 30000 more would exceed max_run_bytes 100000',
    );
    expect(await codeOf(sdk.stat("attempts", "res@3_c"))).toBe(Code.PermissionDenied);
    expect((await sdk.offloadResult(key(2), second)).created).toBe(false);
    expect((await t.backend.list(blobPrefix("dev", "attempts"))).keys).toHaveLength(2);
    expect(sha256(await readBack(sdk, "attempts", "res@2_c"))).toBe(sha256(second));
  });

  it("refuses while streaming, before the client has sent the whole payload", async () => {
    await t.sdk().offload({ tenant: "dev", runId: "stream", callId: "full" }, "a".repeat(95_000));
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const call = t.raw().offload(
      (async function* () {
        yield create(OffloadRequestSchema, {
          msg: {
            case: "header",
            value: { key: { tenant: "dev", runId: "stream", callId: "over" } },
          },
        });
        yield create(OffloadRequestSchema, {
          msg: { case: "chunk", value: new Uint8Array(10_000) },
        });
        // The rest of the payload never comes: only a refusal during the stream ends the call.
        await gate;
      })(),
    );
    try {
      const err = await errorOf(call);
      expect(err?.code).toBe(Code.ResourceExhausted);
      expect(err?.rawMessage).toBe(
        'run "stream" holds 95000 bytes; storing 10000 more would exceed max_run_bytes 100000',
      );
    } finally {
      release();
    }
    expect(await codeOf(t.sdk().stat("stream", "res_over"))).toBe(Code.PermissionDenied);
  });

  it("does not count records a fork copied from its parent", async () => {
    const sdk = t.sdk();
    await sdk.offload({ tenant: "dev", runId: "parent", callId: "big" }, "p".repeat(90_000));
    await sdk.forkRun("parent", "child");
    await sdk.offload({ tenant: "dev", runId: "child", callId: "own" }, "q".repeat(90_000));
    const err = await errorOf(
      sdk.offload({ tenant: "dev", runId: "child", callId: "more" }, "r".repeat(20_000)),
    );
    expect(err?.rawMessage).toBe(
      'run "child" holds 90000 bytes; storing 20000 more would exceed max_run_bytes 100000',
    );
    expect(sha256(await readBack(sdk, "child", "res_big"))).toBe(sha256("p".repeat(90_000)));
  });
});

describe("max bytes per run from the token file", () => {
  it("lowers the server's limit for that tenant only", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spillway-run-limit-"));
    const tokenFile = join(dir, "tokens");
    await writeFile(
      tokenFile,
      `${hashToken("small")} small max_run_bytes=50000\n${hashToken("big")} big\n`,
    );
    const server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      tokenFile,
      limits: { maxRunBytes: 100_000 },
    });
    try {
      const small = createSpillwayClient({ baseUrl: server.url, token: "small" });
      const big = createSpillwayClient({ baseUrl: server.url, token: "big" });
      await small.offload({ tenant: "small", runId: "r", callId: "one" }, "a".repeat(40_000));
      const err = await errorOf(
        small.offload({ tenant: "small", runId: "r", callId: "two" }, "b".repeat(20_000)),
      );
      expect(err?.code).toBe(Code.ResourceExhausted);
      expect(err?.rawMessage).toBe(
        'run "r" holds 40000 bytes; storing 20000 more would exceed max_run_bytes 50000',
      );
      const ok = await big.offload(
        { tenant: "big", runId: "r", callId: "one" },
        "c".repeat(90_000),
      );
      expect(ok.sizeBytes).toBe(90_000n);
    } finally {
      await server.close(1000);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
