import { createHash, randomBytes } from "node:crypto";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { crc32 } from "node:zlib";
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { Code, ConnectError } from "@connectrpc/connect";
import type { FinalizeRequestMiddleware, MetadataBearer } from "@smithy/types";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { codeOf } from "../../../test/support/code-of.js";
import { expectListRunsPagesEveryRunOnce } from "../../../test/support/list-runs-paging.js";
import {
  atomicConditionalComplete,
  bodyChecksumSupport,
  conditionalWriteSupport,
  freePort,
  keepsConnectionsOpen,
  listsInByteOrder,
  missingBucketReportedOnWrite,
  type ObjectServerInfo,
  objectServerKinds,
  signatureCheckSupport,
  startObjectServer,
} from "../../../test/support/object-server.js";
import { createTestS3Client } from "../../../test/support/s3-client.js";
import type { Backend } from "./backend.js";
import { bytesBody, readAllBytes } from "./body.js";
import { describeBackendContract } from "./contract.js";
import { fromS3Error } from "./from-s3-error.js";
import { createS3Backend } from "./s3.js";

const MiB = 1024 * 1024;
const servers = inject("objectServers");

for (const kind of objectServerKinds) {
  const info = servers[kind];

  describeBackendContract(
    `s3 on ${kind}`,
    async () => {
      const admin = createTestS3Client(info);
      const bucket = await createBucket(admin);
      return {
        backend: createS3Backend({ ...connection(info), bucket }),
        cleanup: async () => {
          await destroyBucket(admin, bucket);
          admin.destroy();
        },
      };
    },
    { listsInByteOrder: listsInByteOrder[kind], putsMany: false },
  );

  describe(`s3 backend on ${kind}`, () => {
    const admin = createTestS3Client(info);
    const rootPrefix = "spillway-root";
    let bucket = "";
    let backend: Backend | undefined;

    beforeAll(async () => {
      bucket = await createBucket(admin);
      backend = createS3Backend({
        ...connection(info),
        bucket,
        prefix: rootPrefix,
        partSizeBytes: 5 * MiB,
        queueSize: 2,
      });
    });

    afterAll(async () => {
      await backend?.close();
      await destroyBucket(admin, bucket);
      admin.destroy();
    });

    function subject(): Backend {
      if (backend === undefined) throw new Error("beforeAll did not create the backend");
      return backend;
    }

    it("lets ListRuns page through every run once, whatever order the store lists in", async () => {
      await expectListRunsPagesEveryRunOnce(subject());
    });

    /** Multipart uploads in progress for a backend key (as the store names it). */
    async function uploadsFor(key: string): Promise<number> {
      const out = await admin.send(
        new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: `${rootPrefix}/${key}` }),
      );
      return (out.Uploads ?? []).filter((u) => u.Key === `${rootPrefix}/${key}`).length;
    }

    /** Resolves once the store lists a multipart upload for key, so a test knows one exists. */
    async function untilUploadStarted(key: string): Promise<void> {
      for (let attempt = 0; attempt < 400; attempt++) {
        if ((await uploadsFor(key)) > 0) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`no multipart upload ever started for ${key}`);
    }

    it("lists 1,001 keys across pages, each exactly once, and deletes them in batches", async () => {
      const prefix = `page-${randomBytes(4).toString("hex")}/`;
      const keys = Array.from(
        { length: 1001 },
        (_, i) => `${prefix}k${String(i).padStart(4, "0")}`,
      );
      await inBatches(keys, 32, (key) => subject().put(key, bytesBody(text(key))));

      const first = await subject().list(prefix);
      expect(first.keys).toHaveLength(1000);
      expect(first.truncated).toBe(true);
      const second = await subject().list(prefix, { startAfter: first.keys.at(-1) });
      expect(second.keys).toEqual([keys[1000]]);
      expect(second.truncated).toBe(false);
      expect([...first.keys, ...second.keys]).toEqual(keys);

      const whole = await subject().list(prefix, { limit: 5000 });
      expect(whole.keys).toEqual(keys);
      expect(whole.truncated).toBe(false);

      await subject().deleteMany(keys);
      expect((await subject().list(prefix)).keys).toEqual([]);
    });

    it("round-trips a 20 MiB multipart upload and leaves no upload behind", async () => {
      const key = `multipart-${randomBytes(4).toString("hex")}`;
      const payload = new Uint8Array(randomBytes(20 * MiB + 12_345));
      const info = await subject().put(key, chunks(payload, 700_001));
      expect(info.size).toBe(payload.byteLength);
      const got = await readAllBytes(await subject().get(key));
      expect(got.byteLength).toBe(payload.byteLength);
      expect(sha256(got)).toBe(sha256(payload));
      expect((await subject().head(key))?.size).toBe(payload.byteLength);
      const middle = await readAllBytes(
        await subject().get(key, { offset: 5 * MiB - 10, length: 20 }),
      );
      expect(middle).toEqual(payload.subarray(5 * MiB - 10, 5 * MiB + 10));
      expect(await uploadsFor(key)).toBe(0);
    });

    it("stores bodies around the part size whole, as one put or as parts", async () => {
      // 5 MiB parts: one byte short of a part, exactly one, one byte over, and two exactly,
      // each in chunks whose edges do not meet the part's.
      for (const size of [5 * MiB - 1, 5 * MiB, 5 * MiB + 1, 10 * MiB]) {
        const key = `edge-${size}-${randomBytes(3).toString("hex")}`;
        const payload = new Uint8Array(randomBytes(size));
        expect((await subject().put(key, chunks(payload, 999_983))).size).toBe(size);
        const got = await readAllBytes(await subject().get(key));
        expect(sha256(got)).toBe(sha256(payload));
        expect(await uploadsFor(key)).toBe(0);
      }
    });

    it("keeps concurrent multipart puts apart while part buffers and the producer's are reused", async () => {
      const payloads = [0, 1].map(() => new Uint8Array(randomBytes(11 * MiB + 4321)));
      // One buffer per producer, refilled after each yield, as the contract allows.
      async function* reusing(payload: Uint8Array): AsyncGenerator<Uint8Array> {
        const buffer = new Uint8Array(300_001);
        for (let at = 0; at < payload.byteLength; at += buffer.byteLength) {
          const n = Math.min(buffer.byteLength, payload.byteLength - at);
          buffer.set(payload.subarray(at, at + n));
          yield buffer.subarray(0, n);
        }
      }
      // A second round runs on part buffers the first one gave back.
      for (const round of [1, 2]) {
        const keys = payloads.map(
          (_, i) => `pooled-${round}-${i}-${randomBytes(3).toString("hex")}`,
        );
        await Promise.all(
          keys.map((key, i) => subject().put(key, reusing(payloads[i] as Uint8Array))),
        );
        for (const [i, key] of keys.entries()) {
          const got = await readAllBytes(await subject().get(key));
          expect(sha256(got)).toBe(sha256(payloads[i] as Uint8Array));
        }
      }
    });

    it("aborts the multipart upload when the body throws mid-stream", async () => {
      const key = `broken-${randomBytes(4).toString("hex")}`;
      async function* failing(): AsyncGenerator<Uint8Array> {
        for (let i = 0; i < 6; i++) yield new Uint8Array(MiB).fill(i);
        await untilUploadStarted(key);
        throw new Error("producer failed");
      }
      const err = await failure(subject().put(key, failing()));
      expect(err.code).not.toBe(Code.AlreadyExists);
      expect(await uploadsFor(key)).toBe(0);
      expect(await subject().head(key)).toBeUndefined();
      expect(await codeOf(subject().get(key))).toBe(Code.NotFound);
    });

    it("aborts the multipart upload when the signal aborts while the body is stalled", async () => {
      const key = `cancelled-${randomBytes(4).toString("hex")}`;
      const controller = new AbortController();
      let release: () => void = () => undefined;
      const never = new Promise<void>((resolve) => {
        release = resolve;
      });
      async function* stalled(): AsyncGenerator<Uint8Array> {
        for (let i = 0; i < 6; i++) yield new Uint8Array(MiB).fill(i);
        await untilUploadStarted(key);
        controller.abort();
        await never;
        yield new Uint8Array(1);
      }
      try {
        const err = await failure(subject().put(key, stalled(), { signal: controller.signal }));
        expect(err.code).toBe(Code.Canceled);
      } finally {
        release();
      }
      expect(await uploadsFor(key)).toBe(0);
      expect(await subject().head(key)).toBeUndefined();
    });

    it("lets one of two racing multipart puts of a key win, per conditional-write support", async () => {
      const key = `race-${randomBytes(4).toString("hex")}`;
      // Both bodies wait until both puts are past their existence check, so the race is real.
      let arrived = 0;
      let bothStarted: () => void = () => undefined;
      const started = new Promise<void>((resolve) => {
        bothStarted = resolve;
      });
      async function* body(fill: number): AsyncGenerator<Uint8Array> {
        for (let i = 0; i < 6; i++) yield new Uint8Array(MiB).fill(fill);
        arrived++;
        if (arrived === 2) bothStarted();
        await started;
        yield new Uint8Array(MiB).fill(fill);
      }
      const results = await Promise.allSettled([
        subject().put(key, body(1)),
        subject().put(key, body(2)),
      ]);
      const stored = await readAllBytes(await subject().get(key));
      expect(stored.byteLength).toBe(7 * MiB);
      const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i + 1] : []));
      for (const r of results) {
        if (r.status === "rejected") {
          expect(ConnectError.from(r.reason).code).toBe(Code.AlreadyExists);
        }
      }
      // Whoever won, the object is one writer's bytes, never a mix.
      expect(winners).toContain(stored[0]);
      expect(stored.every((b) => b === stored[0])).toBe(true);
      if (conditionalWriteSupport[kind] && atomicConditionalComplete[kind]) {
        expect(winners).toHaveLength(1);
      } else {
        // Documented difference: a non-atomic check may let both completions succeed.
        expect(winners.length).toBeGreaterThanOrEqual(1);
      }
      expect(await uploadsFor(key)).toBe(0);
    });

    it("answers a multipart put to an existing key with ALREADY_EXISTS, keeping the original", async () => {
      const key = `existing-${randomBytes(4).toString("hex")}`;
      await subject().put(key, bytesBody(text("original")));
      const err = await failure(subject().put(key, chunks(new Uint8Array(6 * MiB), MiB)));
      expect(err.code).toBe(Code.AlreadyExists);
      expect(await readAllBytes(await subject().get(key))).toEqual(text("original"));
      expect(await uploadsFor(key)).toBe(0);
    });

    it("keeps every key under the configured prefix and lists keys without it", async () => {
      const key = `scoped-${randomBytes(4).toString("hex")}/t/ten/r/run/obj`;
      await subject().put(key, bytesBody(text("inside")));
      await admin.send(
        new PutObjectCommand({ Bucket: bucket, Key: "outside/obj", Body: text("outside") }),
      );
      const raw = await admin.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: `${rootPrefix}/${key}` }),
      );
      expect((raw.Contents ?? []).map((c) => c.Key)).toEqual([`${rootPrefix}/${key}`]);
      expect((await subject().list("scoped-")).keys).toContain(key);
      expect((await subject().list("")).keys).not.toContain("outside/obj");
      expect((await subject().list("outside")).keys).toEqual([]);
      expect(await codeOf(subject().get("../outside/obj"))).toBe(Code.InvalidArgument);
      expect(await codeOf(subject().put("a/./b", bytesBody(text("x"))))).toBe(Code.InvalidArgument);
      expect(await codeOf(subject().list("a//"))).toBe(Code.InvalidArgument);
    });

    it("lists in the store's documented order", async () => {
      const prefix = `order-${randomBytes(4).toString("hex")}/`;
      for (const name of ["a/a", "a-c", "a.b"]) {
        await subject().put(`${prefix}${name}`, bytesBody(text(name)));
      }
      const listed = (await subject().list(prefix)).keys.map((k) => k.slice(prefix.length));
      expect(listed).toEqual(
        listsInByteOrder[kind] ? ["a-c", "a.b", "a/a"] : ["a/a", "a-c", "a.b"],
      );
    });

    it("maps a missing key to NOT_FOUND and a range past the end to OUT_OF_RANGE", async () => {
      const key = `${rootPrefix}/mapped-${randomBytes(4).toString("hex")}`;
      const missing = await rawFailure(
        admin.send(new GetObjectCommand({ Bucket: bucket, Key: key })),
      );
      expect(fromS3Error(missing, "k").code).toBe(Code.NotFound);
      await admin.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: text("abc") }));
      const past = await rawFailure(
        admin.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: "bytes=10-20" })),
      );
      expect(fromS3Error(past, "k").code).toBe(Code.OutOfRange);
    });

    it("maps a lost If-None-Match write to ALREADY_EXISTS, per conditional-write support", async () => {
      const key = `${rootPrefix}/conflict-${randomBytes(4).toString("hex")}`;
      const put = () =>
        admin.send(
          new PutObjectCommand({ Bucket: bucket, Key: key, Body: text("v"), IfNoneMatch: "*" }),
        );
      await put();
      if (conditionalWriteSupport[kind]) {
        expect(fromS3Error(await rawFailure(put()), "k").code).toBe(Code.AlreadyExists);
      } else {
        await expect(put()).resolves.toBeDefined();
      }
    });

    it("maps a missing bucket to FAILED_PRECONDITION naming the bucket", async () => {
      const absent = `spillway-absent-${randomBytes(6).toString("hex")}`;
      const lost = createS3Backend({ ...connection(info), bucket: absent });
      try {
        const err = await failure(lost.get("k"));
        expect(err.code).toBe(Code.FailedPrecondition);
        expect(err.rawMessage).toContain(`bucket ${absent} does not exist`);
        if (missingBucketReportedOnWrite[kind]) {
          expect(await codeOf(lost.put("k", bytesBody(text("x"))))).toBe(Code.FailedPrecondition);
          expect(await codeOf(lost.list(""))).toBe(Code.FailedPrecondition);
        } else {
          // Documented difference: the store either creates the bucket on the first write or
          // fails it with a 5xx, and lists a missing bucket as empty.
          const put = await codeOf(lost.put("k", bytesBody(text("x"))));
          expect([undefined, Code.Unavailable]).toContain(put);
          expect((await lost.list("")).keys).toEqual(put === undefined ? ["k"] : []);
        }
      } finally {
        await lost.close();
        if (!missingBucketReportedOnWrite[kind]) {
          await destroyBucket(admin, absent).catch((err: unknown) => {
            if (fromS3Error(err).code !== Code.FailedPrecondition) throw err;
          });
        }
      }
    });

    for (const signPayload of [false, true]) {
      const mode = signPayload ? "signed" : "unsigned";

      it(`sends every body with a signed CRC32, its sha256 ${signPayload ? "signed" : "left out"} (${mode})`, async () => {
        const sent: SentBody[] = [];
        const client = watchedClient(info, { sent });
        const watched = createS3Backend({ bucket, client, partSizeBytes: 5 * MiB, signPayload });
        try {
          const small = new Uint8Array(randomBytes(70_000));
          const large = new Uint8Array(randomBytes(11 * MiB + 77));
          const keys = [`sent-small-${mode}`, `sent-large-${mode}`].map(
            (k) => `${k}-${randomBytes(3).toString("hex")}`,
          );
          await watched.put(keys[0] as string, bytesBody(small));
          await watched.put(keys[1] as string, chunks(large, 1_000_003));
          // One PutObject, then three parts.
          expect(sent.map((s) => s.body.byteLength)).toEqual([
            small.byteLength,
            ...[5 * MiB, 5 * MiB, MiB + 77],
          ]);
          for (const { headers, body } of sent) {
            const crc = Buffer.alloc(4);
            crc.writeUInt32BE(crc32(body));
            expect(headers["x-amz-checksum-crc32"]).toBe(crc.toString("base64"));
            expect(headers["x-amz-content-sha256"]).toBe(
              signPayload ? sha256(body) : "UNSIGNED-PAYLOAD",
            );
            const signed = /SignedHeaders=([^,]+)/.exec(headers.authorization ?? "")?.[1];
            expect(signed?.split(";")).toEqual(
              expect.arrayContaining(["x-amz-checksum-crc32", "x-amz-content-sha256"]),
            );
          }
          expect(sha256(await readAllBytes(await watched.get(keys[0] as string)))).toBe(
            sha256(small),
          );
          expect(sha256(await readAllBytes(await watched.get(keys[1] as string)))).toBe(
            sha256(large),
          );
        } finally {
          client.destroy();
        }
      });

      it(`refuses a body changed on the way as UNAVAILABLE, leaving nothing, per server (${mode})`, async () => {
        const client = watchedClient(info, { corrupt: true });
        const corrupting = createS3Backend({
          bucket,
          prefix: rootPrefix,
          client,
          partSizeBytes: 5 * MiB,
          signPayload,
        });
        try {
          for (const size of [70_000, 11 * MiB]) {
            const key = `corrupted-${mode}-${size}-${randomBytes(3).toString("hex")}`;
            const payload = new Uint8Array(randomBytes(size));
            const put = corrupting.put(key, chunks(payload, 1_000_003));
            if (bodyChecksumSupport[kind]) {
              const err = await failure(put);
              expect(err.code).toBe(Code.Unavailable);
              expect(err.rawMessage).toContain("changed on the way");
              expect(await subject().head(key)).toBeUndefined();
              expect(await uploadsFor(key)).toBe(0);
            } else {
              // Documented difference: the store keeps whatever bytes arrive. The SDK checks a
              // whole-object read against a single put's stored CRC32, not against the
              // per-part ones of a multipart object (a record's sha256 is what catches those).
              await put;
              const read = readAllBytes(await subject().get(key));
              if (size <= 5 * MiB) {
                expect((await failure(read)).code).toBe(Code.DataLoss);
              } else {
                expect(sha256(await read)).not.toBe(sha256(payload));
              }
            }
          }
        } finally {
          client.destroy();
        }
      });
    }

    it("runs a multipart upload over at most queueSize + 1 kept-alive connections, per server", async () => {
      const proxy = await countingProxy(info.endpoint);
      const pooled = createS3Backend({
        ...connection(info),
        endpoint: proxy.endpoint,
        bucket,
        partSizeBytes: 5 * MiB,
        queueSize: 2,
      });
      try {
        const key = `pooled-${randomBytes(4).toString("hex")}`;
        const payload = new Uint8Array(randomBytes(26 * MiB));
        // A HeadObject, the create call, six parts and the completion: nine requests.
        expect((await pooled.put(key, chunks(payload, 1_000_003))).size).toBe(payload.byteLength);
        if (keepsConnectionsOpen[kind]) {
          // A part's connection goes back to the pool a moment after its answer, so the next
          // part may find none free and open one more: queueSize + 1, however many parts.
          expect(proxy.connections()).toBeLessThanOrEqual(3);
        } else {
          // Documented difference: the store closes every connection after its answer.
          expect(proxy.connections()).toBe(9);
        }
        expect(sha256(await readAllBytes(await pooled.get(key)))).toBe(sha256(payload));
      } finally {
        await pooled.close();
        await proxy.close();
      }
    });

    it("maps a wrong secret to PERMISSION_DENIED without the store's detail, per server", async () => {
      const denied = createS3Backend({
        ...connection(info),
        bucket,
        credentials: { accessKeyId: info.accessKeyId, secretAccessKey: "not-the-secret" },
      });
      const key = `denied-${randomBytes(4).toString("hex")}`;
      try {
        if (signatureCheckSupport[kind]) {
          const err = await failure(denied.put(key, bytesBody(text("x"))));
          expect(err.code).toBe(Code.PermissionDenied);
          expect(err.rawMessage.toLowerCase()).not.toContain("signature");
          expect(err.rawMessage).not.toContain(info.accessKeyId);
          expect(err.cause).toBeInstanceOf(S3ServiceException);
          expect(await codeOf(denied.list(""))).toBe(Code.PermissionDenied);
          expect(await subject().head(key)).toBeUndefined();
        } else {
          // Documented difference: the store accepts any credentials.
          await expect(denied.put(key, bytesBody(text("x")))).resolves.toMatchObject({ size: 1 });
        }
      } finally {
        await denied.close();
      }
    });
  });
}

describe("s3 backend while the store is down", () => {
  it("reports UNAVAILABLE for a stopped endpoint and recovers without a new backend", async () => {
    const server = await startObjectServer("moto");
    const admin = createTestS3Client(server);
    const backend = createS3Backend({ ...connection(server), bucket: "spillway-outage" });
    try {
      await admin.send(new CreateBucketCommand({ Bucket: "spillway-outage" }));
      await backend.put("before", bytesBody(text("x")));
      await server.pause();
      for (const call of [
        () => backend.head("before"),
        () => backend.get("before"),
        () => backend.put("during", bytesBody(text("y"))),
        () => backend.list(""),
        () => backend.delete("before"),
      ]) {
        expect(await codeOf(call())).toBe(Code.Unavailable);
      }
      await server.restart();
      // moto keeps everything in memory, so the restarted store starts empty.
      await admin.send(new CreateBucketCommand({ Bucket: "spillway-outage" }));
      await backend.put("after", bytesBody(text("z")));
      expect(await readAllBytes(await backend.get("after"))).toEqual(text("z"));
    } finally {
      await backend.close();
      admin.destroy();
      await server.stop();
    }
  });

  it("reports UNAVAILABLE when nothing listens at the endpoint", async () => {
    const port = await freePort();
    const backend = createS3Backend({
      bucket: "spillway-nowhere",
      endpoint: `http://127.0.0.1:${port}`,
      forcePathStyle: true,
      credentials: { accessKeyId: "a", secretAccessKey: "b" },
    });
    try {
      const err = await failure(backend.head("k"));
      expect(err.code).toBe(Code.Unavailable);
      expect(err.rawMessage).not.toContain(String(port));
    } finally {
      await backend.close();
    }
  });
});

describe("createS3Backend options", () => {
  it("refuses an empty bucket, a prefix that breaks the key rules and a too-small part size", () => {
    const base = { endpoint: "http://127.0.0.1:9", forcePathStyle: true, bucket: "b" };
    for (const opts of [
      { ...base, bucket: "" },
      { ...base, prefix: "/spillway" },
      { ...base, prefix: "spillway//" },
      { ...base, prefix: "a/../b" },
      { ...base, partSizeBytes: MiB },
    ]) {
      expect(() => createS3Backend(opts)).toThrow(
        expect.objectContaining({ code: Code.InvalidArgument }),
      );
    }
  });
});

describe("fromS3Error", () => {
  function serviceError(name: string, status: number, fault: "client" | "server" = "client") {
    return new S3ServiceException({
      name,
      $fault: fault,
      $metadata: { httpStatusCode: status },
      message: `store detail for ${name}`,
    });
  }

  it("maps a body refused for its checksum to UNAVAILABLE and a read failing it to DATA_LOSS", () => {
    for (const name of ["BadDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch"]) {
      const mapped = fromS3Error(serviceError(name, 400), "k");
      expect(mapped.code).toBe(Code.Unavailable);
      expect(mapped.rawMessage).toContain("changed on the way");
    }
    const mismatch = new Error('Checksum mismatch: expected "AAAAAA==" but received "AQAAAA=="');
    const mapped = fromS3Error(mismatch, "k");
    expect(mapped.code).toBe(Code.DataLoss);
    expect(mapped.cause).toBe(mismatch);
  });

  it("maps throttling to UNAVAILABLE", () => {
    for (const err of [
      serviceError("SlowDown", 503, "server"),
      serviceError("Throttling", 400),
      serviceError("ThrottlingException", 400),
      serviceError("TooManyRequests", 429),
    ]) {
      const mapped = fromS3Error(err, "k");
      expect(mapped.code).toBe(Code.Unavailable);
      expect(mapped.rawMessage).toContain("throttling");
      expect(mapped.cause).toBe(err);
    }
  });

  it("maps other 5xx answers to UNAVAILABLE", () => {
    expect(fromS3Error(serviceError("InternalError", 500, "server")).code).toBe(Code.Unavailable);
    expect(fromS3Error(serviceError("Unknown", 502, "server")).code).toBe(Code.Unavailable);
    expect(fromS3Error(serviceError("NotImplemented", 501, "server")).code).toBe(Code.Unavailable);
  });

  it("maps network failures and timeouts to UNAVAILABLE", () => {
    const network = ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND"].map((code) =>
      Object.assign(new Error(`connect ${code}`), { code }),
    );
    const hangUp = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    const timeout = Object.assign(new Error("Connection timed out after 3000 ms"), {
      name: "TimeoutError",
    });
    for (const err of [...network, hangUp, timeout, new Error("socket hang up")]) {
      expect(fromS3Error(err, "k").code).toBe(Code.Unavailable);
    }
  });

  it("maps conflicts, denials and missing things by name or status", () => {
    expect(fromS3Error(serviceError("ConditionalRequestConflict", 409)).code).toBe(
      Code.AlreadyExists,
    );
    expect(fromS3Error(serviceError("PreconditionFailed", 412)).code).toBe(Code.AlreadyExists);
    expect(fromS3Error(serviceError("NotFound", 404)).code).toBe(Code.NotFound);
    expect(fromS3Error(serviceError("InvalidRange", 416)).code).toBe(Code.OutOfRange);
    const denied = fromS3Error(serviceError("AccessDenied", 403), "k");
    expect(denied.code).toBe(Code.PermissionDenied);
    expect(denied.rawMessage).not.toContain("store detail");
    expect(fromS3Error(serviceError("InvalidAccessKeyId", 403)).code).toBe(Code.PermissionDenied);
    const bucket = fromS3Error(serviceError("NoSuchBucket", 404), "k", "b1");
    expect(bucket.code).toBe(Code.FailedPrecondition);
    expect(bucket.rawMessage).toContain("bucket b1 does not exist");
  });

  it("maps aborts to CANCELED, keeps ConnectErrors and reports the rest as INTERNAL", () => {
    const aborted = Object.assign(new Error("Upload aborted."), { name: "AbortError" });
    expect(fromS3Error(aborted, "k").code).toBe(Code.Canceled);
    const existing = new ConnectError("bad", Code.InvalidArgument);
    expect(fromS3Error(existing)).toBe(existing);
    const odd = fromS3Error(new Error("surprise"), "k");
    expect(odd.code).toBe(Code.Internal);
    expect(odd.rawMessage).toContain('key "k"');
    expect(odd.rawMessage).not.toContain("surprise");
    expect(fromS3Error(serviceError("MalformedXML", 400)).code).toBe(Code.Internal);
  });
});

/** A body-carrying request as it left the client, after signing. */
interface SentBody {
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
}

/**
 * watchedClient returns an S3 client for `info` that sees every request carrying a body once
 * it is signed: it records them into `sent`, and with `corrupt` flips one byte of each body
 * (in a copy) after its checksums were taken, as a fault on the wire would.
 */
function watchedClient(
  info: ObjectServerInfo,
  watch: { sent?: SentBody[]; corrupt?: boolean },
): S3Client {
  const client = new S3Client({ ...connection(info), maxAttempts: 1 });
  const watchBodies: FinalizeRequestMiddleware<object, MetadataBearer> = (next) => (args) => {
    const request = args.request as { headers: Record<string, string>; body?: unknown };
    if (request.body instanceof Uint8Array && request.body.byteLength > 0) {
      // A copy: the body is a view of a part buffer that later parts reuse.
      watch.sent?.push({ headers: { ...request.headers }, body: Buffer.from(request.body) });
      if (watch.corrupt === true) {
        const changed = Buffer.from(request.body);
        changed.writeUInt8(changed.readUInt8(0) ^ 0x01, 0);
        request.body = changed;
      }
    }
    return next(args);
  };
  client.middlewareStack.addRelativeTo(watchBodies, {
    relation: "after",
    toMiddleware: "httpSigningMiddleware",
    name: "watchBodies",
  });
  return client;
}

/** A TCP relay in front of an endpoint that counts the connections clients open through it. */
interface CountingProxy {
  /** The endpoint URL to give clients instead of the real one. */
  readonly endpoint: string;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

async function countingProxy(target: string): Promise<CountingProxy> {
  const url = new URL(target);
  const port = Number(url.port);
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    accepted++;
    const upstream = connect(port, url.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => socket.destroy());
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as AddressInfo;
  url.port = String(address.port);
  return {
    endpoint: url.toString().replace(/\/$/, ""),
    connections: () => accepted,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function connection(info: ObjectServerInfo) {
  return {
    endpoint: info.endpoint,
    region: info.region,
    forcePathStyle: true,
    credentials: { accessKeyId: info.accessKeyId, secretAccessKey: info.secretAccessKey },
  };
}

async function createBucket(admin: S3Client): Promise<string> {
  const bucket = `spillway-s3-${randomBytes(6).toString("hex")}`;
  await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

/** Aborts every multipart upload, deletes every object, then the bucket itself. */
async function destroyBucket(admin: S3Client, bucket: string): Promise<void> {
  const uploads = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  for (const upload of uploads.Uploads ?? []) {
    await admin.send(
      new AbortMultipartUploadCommand({
        Bucket: bucket,
        Key: upload.Key,
        UploadId: upload.UploadId,
      }),
    );
  }
  for (;;) {
    const page = await admin.send(new ListObjectsV2Command({ Bucket: bucket }));
    const objects = (page.Contents ?? []).map((c) => ({ Key: c.Key }));
    if (objects.length === 0) break;
    await admin.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects } }));
  }
  await admin.send(new DeleteBucketCommand({ Bucket: bucket }));
}

async function inBatches<T>(
  items: readonly T[],
  width: number,
  run: (item: T) => Promise<unknown>,
): Promise<void> {
  for (let at = 0; at < items.length; at += width) {
    await Promise.all(items.slice(at, at + width).map(run));
  }
}

/** Awaits a call that must fail and returns what it threw. */
async function rawFailure(pending: Promise<unknown>): Promise<unknown> {
  try {
    await pending;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

/** Awaits a backend call that must fail with a ConnectError and returns it. */
async function failure(pending: Promise<unknown>): Promise<ConnectError> {
  const err = await rawFailure(pending);
  if (!(err instanceof ConnectError)) throw new Error(`not a ConnectError: ${String(err)}`);
  return err;
}

async function* chunks(payload: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < payload.byteLength; at += size) yield payload.slice(at, at + size);
}

function text(value: string): Uint8Array {
  return new TextEncoder().encode(value);
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}
