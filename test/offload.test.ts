import { createHash, randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type OffloadRequest,
  OffloadRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { Storage } from "@spillway/proto/spillway/v1/types_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf, failureOf } from "./support/code-of.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(join(entry.parentPath, entry.name));
  }
  return out;
}

describe.each(serviceBackends)("Offload (%s)", (backendKind) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: backendKind,
      limits: { maxChunkBytes: 1024 * 1024, maxBlobBytes: 64 << 20 },
    });
  });
  afterAll(() => t.stop());
  const key = (callId: string, runId = "run") => ({ tenant: "dev", runId, callId });

  it("stores a multi-chunk payload losslessly and reports digest, size and lines", async () => {
    const text = Array.from(
      { length: 50_000 },
      (_, i) => `line ${i + 1} ${"x".repeat(i % 50)}`,
    ).join("\n");
    const bytes = Buffer.from(text);
    const a = await t.sdk().offload(key("big"), bytes, { name: "tool", contentType: "text/plain" });
    expect(a.stored).toBe(Storage.BLOB);
    expect(a.sha256).toBe(sha(bytes));
    expect(a.sizeBytes).toBe(BigInt(bytes.byteLength));
    expect(a.lineCount).toBe(50_000n);
    expect(a.readable).toBe(true);
    const w = await t.sdk().readToolOutput({
      runId: "run",
      handle: "res_big",
      window: { case: "bytes", value: { offset: 0n } },
      omitRendered: true,
    });
    const back = Buffer.concat(
      w.frames.flatMap((f) =>
        f.frame.case === "content" && f.frame.value.body.case === "data"
          ? [f.frame.value.body.value]
          : [],
      ),
    );
    expect(sha(back)).toBe(sha(bytes));
  });

  it("keeps small payloads inline", async () => {
    const a = await t.sdk().offload(key("small"), "tiny\n");
    expect(a.stored).toBe(Storage.INLINE);
    const w = await t.sdk().readToolOutput({ runId: "run", handle: "res_small" });
    expect(w.rendered).toContain("tiny");
  });

  it("returns the same record for the same bytes (idempotent retry)", async () => {
    const bytes = randomBytes(300_000);
    const first = await t.sdk().offload(key("idem"), bytes);
    const again = await t.sdk().raw.offload(
      (async function* () {
        yield create(OffloadRequestSchema, {
          msg: { case: "header", value: { key: key("idem") } },
        });
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: bytes } });
      })(),
    );
    expect(again.created).toBe(false);
    expect(again.attachment?.sha256).toBe(first.sha256);
    expect(again.attachment?.createTime).toEqual(first.createTime);
  });

  it("refuses different bytes for a committed key with ALREADY_EXISTS and keeps the original", async () => {
    await t.sdk().offload(key("orig"), "original\n");
    expect(await codeOf(t.sdk().offload(key("orig"), "changed\n"))).toBe(Code.AlreadyExists);
    const w = await t.sdk().readToolOutput({ runId: "run", handle: "res_orig" });
    expect(w.rendered).toContain("original");
    expect(w.rendered).not.toContain("changed");
  });

  it("refuses a declared size or sha256 that does not match, committing nothing", async () => {
    const bytes = randomBytes(100_000);
    expect(await codeOf(t.sdk().offload(key("badsize"), bytes, { expectedSize: 5n }))).toBe(
      Code.InvalidArgument,
    );
    expect(
      await codeOf(t.sdk().offload(key("badsha"), bytes, { expectedSha256: "0".repeat(64) })),
    ).toBe(Code.DataLoss);
    for (const handle of ["res_badsize", "res_badsha"]) {
      expect(await codeOf(t.sdk().readToolOutput({ runId: "run", handle }))).toBe(
        Code.PermissionDenied,
      );
    }
    const ok = await t.sdk().offload(key("goodsha"), bytes, {
      expectedSha256: sha(bytes),
      expectedSize: BigInt(bytes.byteLength),
    });
    expect(ok.sha256).toBe(sha(bytes));
  });

  it("checks a replay's declared size and sha256, then answers the committed record", async () => {
    const bytes = Buffer.from(`{"rows":[${'"x",'.repeat(2_000)}"y"]}\n`);
    const first = await t.sdk().offload(key("declared-replay"), bytes, {
      contentType: "application/json",
    });
    expect(await codeOf(t.sdk().offload(key("declared-replay"), bytes, { expectedSize: 5n }))).toBe(
      Code.InvalidArgument,
    );
    expect(
      await codeOf(
        t.sdk().offload(key("declared-replay"), bytes, { expectedSha256: "0".repeat(64) }),
      ),
    ).toBe(Code.DataLoss);
    // A replay hashes its bytes and nothing more: preview, lines and JSON view are the record's.
    const again = await t.sdk().offload(key("declared-replay"), bytes, {
      expectedSha256: sha(bytes),
      expectedSize: BigInt(bytes.byteLength),
    });
    expect(again).toEqual(first);
    expect(again.jsonViewLines).toBeGreaterThan(0n);
    expect(again.preview?.head).toContain('"rows"');
  });

  it("answers a preview-only replay with its record, and different bytes with ALREADY_EXISTS", async () => {
    const first = await t.sdk().offload(key("po-replay"), "kept as preview\n", {
      previewOnly: true,
    });
    const again = await t.sdk().offload(key("po-replay"), "kept as preview\n", {
      previewOnly: true,
    });
    expect(again).toEqual(first);
    expect(
      await codeOf(t.sdk().offload(key("po-replay"), "other bytes\n", { previewOnly: true })),
    ).toBe(Code.AlreadyExists);
  });

  it("refuses a payload announced over max_blob_bytes before any of it is sent", async () => {
    // The header alone, then a stream that never sends: the answer cannot wait for bytes.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const announced = t.sdk().raw.offload(
      (async function* () {
        yield create(OffloadRequestSchema, {
          msg: {
            case: "header",
            value: { key: key("announced"), expectedSize: BigInt(64 << 20) + 1n },
          },
        });
        await held;
      })(),
    );
    try {
      const err = await failureOf(announced);
      expect(err.code).toBe(Code.ResourceExhausted);
      expect(err.rawMessage).toContain(`expected_size ${(64 << 20) + 1}`);
      expect(err.rawMessage).toContain(`max_blob_bytes ${64 << 20}`);
    } finally {
      release();
    }
    // The SDK announces the size of a payload it holds whole, so the same refusal comes first.
    const whole = Buffer.alloc((64 << 20) + 1);
    const viaSdk = await failureOf(t.sdk().offload(key("announced-sdk"), whole));
    expect(viaSdk.code).toBe(Code.ResourceExhausted);
    expect(viaSdk.rawMessage).toContain("expected_size");
    expect(await codeOf(t.sdk().readToolOutput({ runId: "run", handle: "res_announced" }))).toBe(
      Code.PermissionDenied,
    );
  });

  it("keeps observed_bytes exact up to 2^53 - 1 and refuses more with INVALID_ARGUMENT", async () => {
    const max = BigInt(Number.MAX_SAFE_INTEGER);
    const kept = await t.sdk().offload(key("observed-max"), "abc", { observedBytes: max });
    expect(kept.observedBytes).toBe(max);
    const err = await failureOf(
      t.sdk().offload(key("observed-huge"), "abc", { observedBytes: 2n ** 63n - 1n }),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toContain("observed_bytes");
  });

  it("leaves nothing visible and no temp file when the client cancels mid-stream", async () => {
    const controller = new AbortController();
    let sent = 0;
    const stream = (async function* (): AsyncGenerator<OffloadRequest> {
      yield create(OffloadRequestSchema, {
        msg: { case: "header", value: { key: key("cancel") } },
      });
      for (;;) {
        yield create(OffloadRequestSchema, {
          msg: { case: "chunk", value: randomBytes(256 * 1024) },
        });
        sent++;
        if (sent === 20) controller.abort();
      }
    })();
    expect(await codeOf(t.sdk().raw.offload(stream, { signal: controller.signal }))).toBe(
      Code.Canceled,
    );
    // The server notices the reset asynchronously; poll until its cleanup has run.
    let leftovers: string[] = [];
    for (let i = 0; i < 100; i++) {
      const files = (await listFiles(t.dataDir)).filter((f) => f.includes(".tmp-"));
      const keys = (await t.backend.list("t/")).keys.filter((k) => k.includes("cancel"));
      leftovers = [...files, ...keys];
      if (leftovers.length === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(leftovers).toEqual([]);
    expect(await codeOf(t.sdk().readToolOutput({ runId: "run", handle: "res_cancel" }))).toBe(
      Code.PermissionDenied,
    );
  });

  it.each([
    [
      "a stream with no header",
      [{ case: "chunk", value: new Uint8Array([1]) }],
      Code.InvalidArgument,
    ],
    ["an empty stream", [], Code.InvalidArgument],
    [
      "two headers",
      [
        { case: "header", value: { key: { tenant: "dev", runId: "run", callId: "two" } } },
        { case: "header", value: { key: { tenant: "dev", runId: "run", callId: "two" } } },
      ],
      Code.InvalidArgument,
    ],
    [
      "an oversize chunk",
      [
        { case: "header", value: { key: { tenant: "dev", runId: "run", callId: "huge" } } },
        { case: "chunk", value: new Uint8Array(2 * 1024 * 1024) },
      ],
      Code.ResourceExhausted,
    ],
  ] as const)("refuses %s", async (_, msgs, code) => {
    const stream = (async function* () {
      for (const msg of msgs) yield create(OffloadRequestSchema, { msg } as never);
    })();
    expect(await codeOf(t.sdk().raw.offload(stream))).toBe(code);
  });

  it.each([
    ["traversal in run_id", { tenant: "dev", runId: "..", callId: "c" }, "run_id"],
    ["a slash in call_id", { tenant: "dev", runId: "r", callId: "a/b" }, "call_id"],
    ["a backslash in run_id", { tenant: "dev", runId: "a\\b", callId: "c" }, "run_id"],
    ["a NUL in call_id", { tenant: "dev", runId: "r", callId: "a\u0000" }, "call_id"],
    ["an empty call_id", { tenant: "dev", runId: "r", callId: "" }, "call_id"],
    ["a 10 KB run_id", { tenant: "dev", runId: "r".repeat(10_000), callId: "c" }, "run_id"],
  ])("refuses %s with INVALID_ARGUMENT naming the field", async (_, k, field) => {
    const err = await t
      .sdk()
      .offload(k, "x")
      .catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toContain(`header.key.${field}`);
  });

  it.each([
    ["an absolute file slot", "file:/etc/passwd"],
    ["a traversing file slot", "file:a/../../b"],
    ["an unknown slot", "secrets"],
  ])("refuses %s", async (_, slot) => {
    expect(await codeOf(t.sdk().offload(key("slotted"), "x", { slot }))).toBe(Code.InvalidArgument);
  });

  it("never collides a dotted call id with a slot folded into the call segment", async () => {
    await t.sdk().offload(key("a.stdout"), "plain result of call a.stdout\n");
    await t.sdk().offload(key("a"), "stdout attachment of call a\n", { slot: "stdout" });
    const r1 = await t.sdk().readToolOutput({ runId: "run", handle: "res_a.stdout" });
    const r2 = await t.sdk().readToolOutput({ runId: "run", handle: "out_a_stdout" });
    expect(r1.rendered).toContain("plain result of call a.stdout");
    expect(r2.rendered).toContain("stdout attachment of call a");
  });

  it("keeps only the record of a preview-only offload", async () => {
    const a = await t.sdk().offload(key("po"), "kept as preview\n", { previewOnly: true });
    expect(a.stored).toBe(Storage.PREVIEW_ONLY);
    expect(a.readable).toBe(false);
    expect(a.preview?.head).toContain("kept as preview");
    // The model is not sent to a read that must fail.
    expect(a.preview?.text).not.toContain("read_tool_output(");
    expect(a.preview?.text).toContain("[preview only:");
    expect(await codeOf(t.sdk().readToolOutput({ runId: "run", handle: "res_po" }))).toBe(
      Code.FailedPrecondition,
    );
  });

  it("keeps serving after bad input", async () => {
    const info = await t.sdk().raw.getServerInfo({});
    expect(info.backend).toBe(backendKind === "s3-minio" ? "s3" : backendKind);
    expect(info.caps?.maxWindowLines).toBe(1000);
  });
});

describe("Offload stream bounds", () => {
  it("cancels a stream that stops sending with DEADLINE_EXCEEDED and commits nothing", async () => {
    const t = await startTestServer({ backend: "memory", limits: { idleStreamMs: 300 } });
    try {
      const stalled = (async function* () {
        yield create(OffloadRequestSchema, {
          msg: { case: "header", value: { key: { tenant: "dev", runId: "r", callId: "idle" } } },
        });
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: randomBytes(100_000) } });
        await new Promise((r) => setTimeout(r, 5_000));
      })();
      expect(await codeOf(t.sdk().raw.offload(stalled))).toBe(Code.DeadlineExceeded);
      expect((await t.backend.list("t/")).keys).toEqual([]);
      expect((await t.sdk().raw.getServerInfo({})).backend).toBe("memory");
    } finally {
      await t.stop();
    }
  });
});
