import { createHash, randomBytes } from "node:crypto";
import {
  createServer as createHttpServer,
  type Server as HttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createServer as createNetServer, type Server as NetServer } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import * as Minio from "minio";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { codeOf } from "../../../test/support/code-of.js";
import { expectListRunsPagesEveryRunOnce } from "../../../test/support/list-runs-paging.js";
import {
  conditionalWriteSupport,
  freePort,
  listsInByteOrder,
  type ObjectServerInfo,
} from "../../../test/support/object-server.js";
import type { Backend } from "./backend.js";
import { bytesBody, readAllBytes } from "./body.js";
import { describeBackendContract } from "./contract.js";
import { fromMinioError } from "./from-minio-error.js";
import { createMinioBackend } from "./minio.js";

const mib = 1024 * 1024;
const servers = inject("objectServers");

for (const kind of ["minio", "seaweedfs"] as const) {
  const info = servers[kind];

  describeBackendContract(
    `minio on ${kind}`,
    async () => {
      const bucket = await createBucket(info);
      return {
        backend: createMinioBackend({ ...connection(info), bucket, prefix: "contract" }),
        cleanup: () => removeBucket(info, bucket),
      };
    },
    { listsInByteOrder: listsInByteOrder[kind], putsMany: false },
  );

  describe(`minio backend on ${kind}`, () => {
    const client = clientFor(info);
    let bucket = "";
    let backend: Backend;

    beforeAll(async () => {
      bucket = await createBucket(info);
      backend = createMinioBackend({
        ...connection(info),
        bucket,
        prefix: "own/",
        partSizeBytes: 5 * mib,
      });
    });

    afterAll(async () => {
      await backend.close();
      await removeBucket(info, bucket);
    });

    it("lets ListRuns page through every run once, whatever order the store lists in", async () => {
      await expectListRunsPagesEveryRunOnce(backend);
    });

    it("round-trips ~20 MiB through a multipart upload, byte for byte", async () => {
      const key = `${unique()}large`;
      const payload = new Uint8Array(randomBytes(20 * mib + 12_345));
      const info = await backend.put(key, chunked(payload, [1, 3 * mib + 17, 65_536, 2 * mib]));
      expect(info.size).toBe(payload.byteLength);
      const got = await readAllBytes(await backend.get(key));
      expect(sha256(got)).toBe(sha256(payload));
      const across = await readAllBytes(
        await backend.get(key, { offset: 5 * mib - 10, length: 20 }),
      );
      expect(sha256(across)).toBe(sha256(payload.subarray(5 * mib - 10, 5 * mib + 10)));
      expect((await backend.head(key))?.size).toBe(payload.byteLength);
      expect((await client.statObject(bucket, `own/${key}`)).size).toBe(payload.byteLength);
      expect(await incompleteUploads(client, bucket)).toEqual([]);
    });

    it("uploads one 40 MiB chunk as eight 5 MiB parts, byte for byte", async () => {
      const key = `${unique()}one-chunk`;
      const payload = new Uint8Array(randomBytes(40 * mib));
      expect((await backend.put(key, bytesBody(payload))).size).toBe(payload.byteLength);
      expect(sha256(await readAllBytes(await backend.get(key)))).toBe(sha256(payload));
      // A multipart object's ETag ends in its part count.
      expect((await client.statObject(bucket, `own/${key}`)).etag).toMatch(/-8$/);
      expect(await incompleteUploads(client, bucket)).toEqual([]);
    });

    it("a body failing after several parts leaves no object and no incomplete upload", async () => {
      const key = `${unique()}failing`;
      async function* failing(): AsyncGenerator<Uint8Array> {
        for (let i = 0; i < 12; i++) yield new Uint8Array(mib).fill(i);
        throw new Error("producer failed");
      }
      const code = await codeOf(backend.put(key, failing()));
      expect(code).toBeDefined();
      expect(await backend.head(key)).toBeUndefined();
      expect(await incompleteUploads(client, bucket)).toEqual([]);
    });

    it("an abort after several parts is CANCELED and leaves no incomplete upload", async () => {
      const key = `${unique()}aborted`;
      const controller = new AbortController();
      async function* body(): AsyncGenerator<Uint8Array> {
        for (let i = 0; i < 12; i++) yield new Uint8Array(mib).fill(i);
        controller.abort();
        for (let i = 0; i < 4; i++) yield new Uint8Array(mib).fill(i);
      }
      const code = await codeOf(backend.put(key, body(), { signal: controller.signal }));
      expect(code).toBe(Code.Canceled);
      expect(await backend.head(key)).toBeUndefined();
      expect(await incompleteUploads(client, bucket)).toEqual([]);
    });

    it("create-only holds for a multipart put over an existing key", async () => {
      const key = `${unique()}existing`;
      await backend.put(key, bytesBody(text("original")));
      const big = new Uint8Array(11 * mib).fill(9);
      const code = await codeOf(backend.put(key, chunked(big, [mib])));
      if (conditionalWriteSupport[kind]) {
        expect(code).toBe(Code.AlreadyExists);
        expect(await readAllBytes(await backend.get(key))).toEqual(text("original"));
      } else {
        // A server that ignores If-None-Match overwrites: the documented known difference.
        expect(code).toBeUndefined();
        expect((await backend.head(key))?.size).toBe(big.byteLength);
      }
      expect(await incompleteUploads(client, bucket)).toEqual([]);
    });

    it("create-only holds for a single-request put over an existing key", async () => {
      const key = `${unique()}existing-small`;
      await backend.put(key, bytesBody(text("original")));
      const code = await codeOf(backend.put(key, bytesBody(text("second"))));
      if (conditionalWriteSupport[kind]) {
        expect(code).toBe(Code.AlreadyExists);
        expect(await readAllBytes(await backend.get(key))).toEqual(text("original"));
      } else {
        expect(code).toBeUndefined();
        expect(await readAllBytes(await backend.get(key))).toEqual(text("second"));
      }
    });

    it("keeps keys under its prefix: list and deleteMany see only its own objects", async () => {
      const prefix = unique();
      await client.putObject(bucket, `${prefix}outside`, Buffer.from("x"), 1);
      await backend.put(`${prefix}inside`, bytesBody(text("y")));
      expect((await backend.list(prefix)).keys).toEqual([`${prefix}inside`]);
      expect((await client.statObject(bucket, `own/${prefix}inside`)).size).toBe(1);
      await backend.deleteMany([`${prefix}inside`, `${prefix}outside`]);
      expect((await client.statObject(bucket, `${prefix}outside`)).size).toBe(1);
    });

    it("deleteMany removes more keys than one DeleteObjects batch holds", async () => {
      const prefix = unique();
      const keys = Array.from(
        { length: 1005 },
        (_, i) => `${prefix}k${String(i).padStart(4, "0")}`,
      );
      for (let i = 0; i < keys.length; i += 50) {
        await Promise.all(keys.slice(i, i + 50).map((k) => backend.put(k, bytesBody(text("v")))));
      }
      expect((await backend.list(prefix, { limit: 2000 })).keys).toHaveLength(1005);
      await backend.deleteMany(keys);
      expect((await backend.list(prefix)).keys).toEqual([]);
    });

    it("destroys open get streams on close", async () => {
      const key = `${unique()}open`;
      await backend.put(key, bytesBody(new Uint8Array(2 * mib).fill(3)));
      const closing = createMinioBackend({ ...connection(info), bucket, prefix: "own/" });
      const stream = (await closing.get(key))[Symbol.asyncIterator]();
      const first = await stream.next();
      expect(first.done).toBe(false);
      await closing.close();
      let received = first.value?.byteLength ?? 0;
      const failed = await codeOf(
        (async () => {
          for (let next = await stream.next(); next.done !== true; next = await stream.next()) {
            received += next.value.byteLength;
          }
        })(),
      );
      // Bytes already buffered may still arrive, but the 2 MiB body is cut short.
      expect(failed !== undefined || received < 2 * mib).toBe(true);
    });

    describe("error mapping under real conditions", () => {
      it("a missing bucket is FAILED_PRECONDITION naming the bucket", async () => {
        const missing = `spillway-missing-${randomBytes(6).toString("hex")}`;
        const lost = createMinioBackend({ ...connection(info), bucket: missing });
        const err = await errorOf((async () => readAllBytes(await lost.get("k")))());
        expect(err.code).toBe(Code.FailedPrecondition);
        expect(err.rawMessage).toContain(`bucket ${missing} does not exist`);
        expect((await errorOf(lost.list("p/"))).code).toBe(Code.FailedPrecondition);
      });

      it("a wrong secret is PERMISSION_DENIED without the server's text", async () => {
        const wrong = createMinioBackend({
          ...connection(info),
          secretKey: "not-the-secret",
          bucket,
        });
        for (const call of [
          async () => readAllBytes(await wrong.get("k")),
          () => wrong.put(`${unique()}k`, bytesBody(text("x"))),
          () => wrong.head("k"),
          () => wrong.list(""),
        ]) {
          const err = await errorOf(call());
          expect(err.code).toBe(Code.PermissionDenied);
          expect(err.rawMessage).not.toMatch(/signature|secret|records/i);
        }
      });

      it("an unknown access key is PERMISSION_DENIED", async () => {
        const stranger = createMinioBackend({
          ...connection(info),
          accessKey: "nobody-at-all",
          bucket,
        });
        expect((await errorOf(stranger.list(""))).code).toBe(Code.PermissionDenied);
      });

      it("a conditional-write conflict is ALREADY_EXISTS", async () => {
        const key = `own/${unique()}conflict`;
        await client.putObject(bucket, key, Buffer.from("a"), 1, { "If-None-Match": "*" });
        const second = client.putObject(bucket, key, Buffer.from("b"), 1, { "If-None-Match": "*" });
        if (conditionalWriteSupport[kind]) {
          expect(fromMinioError(await rawErrorOf(second), key).code).toBe(Code.AlreadyExists);
        } else {
          // A server that ignores If-None-Match takes the second write: the known difference.
          await second;
          expect((await client.statObject(bucket, key)).size).toBe(1);
        }
      });

      it("a missing key is NOT_FOUND for get and raw stat", async () => {
        const key = `own/${unique()}missing`;
        expect(fromMinioError(await rawErrorOf(client.getObject(bucket, key))).code).toBe(
          Code.NotFound,
        );
        expect(fromMinioError(await rawErrorOf(client.statObject(bucket, key))).code).toBe(
          Code.NotFound,
        );
      });
    });
  });
}

describe("fromMinioError without an object server", () => {
  it("a stopped server (nothing listening) is UNAVAILABLE", async () => {
    const port = await freePort();
    const down = createMinioBackend({
      endPoint: "127.0.0.1",
      port,
      bucket: "spillway-down",
      region: "us-east-1",
      accessKey: "a-key",
      secretKey: "a-secret",
    });
    for (const call of [
      () => down.head("k"),
      () => down.list(""),
      () => down.put("k", bytesBody(text("x"))),
    ]) {
      const err = await errorOf(call());
      expect(err.code).toBe(Code.Unavailable);
      expect(err.rawMessage).toContain("ECONNREFUSED");
    }
  });

  it("a connection reset is UNAVAILABLE", async () => {
    const resetting = await listenNet(createNetServer((socket) => socket.resetAndDestroy()));
    try {
      const backend = createMinioBackend({
        ...stubConnection(resetting.port),
        bucket: "spillway-stub",
      });
      const err = await errorOf(backend.head("k"));
      expect(err.code).toBe(Code.Unavailable);
      expect(err.rawMessage).toContain("ECONNRESET");
    } finally {
      await resetting.close();
    }
  });

  it("a server answering 503 (SlowDown) is UNAVAILABLE once the client's retry is spent", async () => {
    const busy = await listenHttp((_req, res) => {
      res.statusCode = 503;
      res.end();
    });
    try {
      const backend = createMinioBackend({ ...stubConnection(busy.port), bucket: "spillway-stub" });
      expect((await errorOf(backend.list(""))).code).toBe(Code.Unavailable);
    } finally {
      await busy.close();
    }
  });

  it("an unreadable answer is INTERNAL", async () => {
    const garbled = await listenHttp((_req, res) => {
      res.setHeader("content-type", "application/xml");
      res.end("<NotAListing/>");
    });
    try {
      const backend = createMinioBackend({
        ...stubConnection(garbled.port),
        bucket: "spillway-stub",
      });
      expect((await errorOf(backend.list(""))).code).toBe(Code.Internal);
    } finally {
      await garbled.close();
    }
  });

  it("names the client refuses before sending are INVALID_ARGUMENT", async () => {
    const backend = createMinioBackend({ ...stubConnection(9), bucket: "b" });
    expect((await errorOf(backend.head("k"))).code).toBe(Code.InvalidArgument);
    expect(() =>
      createMinioBackend({ ...stubConnection(70_000), bucket: "spillway-stub" }),
    ).toThrow(expect.objectContaining({ code: Code.InvalidArgument }));
  });

  it("an AbortError is CANCELED", () => {
    const reason: unknown = AbortSignal.abort().reason;
    expect(fromMinioError(reason, "k").code).toBe(Code.Canceled);
  });

  it("passes a ConnectError through unchanged", () => {
    const original = new ConnectError("kept", Code.ResourceExhausted);
    expect(fromMinioError(original)).toBe(original);
  });

  it("maps codes it does not know to INTERNAL and keeps the cause", () => {
    const raw = Object.assign(new Error("server said something private"), { code: "Weird" });
    const err = fromMinioError(raw, "k");
    expect(err.code).toBe(Code.Internal);
    expect(err.rawMessage).not.toContain("private");
    expect(err.cause).toBe(raw);
  });

  it("refuses construction without credentials, and part sizes or prefixes S3 cannot take", () => {
    const saved = { ...process.env };
    for (const name of [
      "MINIO_ACCESS_KEY",
      "MINIO_SECRET_KEY",
      "AWS_ACCESS_KEY_ID",
      "AWS_SECRET_ACCESS_KEY",
      "MINIO_ROOT_USER",
      "MINIO_ROOT_PASSWORD",
    ]) {
      delete process.env[name];
    }
    try {
      expect(() =>
        createMinioBackend({ endPoint: "127.0.0.1", port: 9, bucket: "spillway-stub" }),
      ).toThrow(/credentials/);
      process.env.MINIO_ACCESS_KEY = "from-env";
      process.env.MINIO_SECRET_KEY = "from-env-secret";
      expect(
        createMinioBackend({ endPoint: "127.0.0.1", port: 9, bucket: "spillway-stub" }).kind,
      ).toBe("minio");
    } finally {
      process.env = saved;
    }
    expect(() =>
      createMinioBackend({ ...stubConnection(9), bucket: "b", partSizeBytes: mib }),
    ).toThrow(ConnectError);
    for (const prefix of ["/abs", "a//", "a/../b"]) {
      expect(() => createMinioBackend({ ...stubConnection(9), bucket: "b", prefix })).toThrow(
        expect.objectContaining({ code: Code.InvalidArgument }),
      );
    }
  });
});

function connection(info: ObjectServerInfo) {
  const url = new URL(info.endpoint);
  return {
    endPoint: url.hostname,
    port: Number(url.port),
    region: info.region,
    accessKey: info.accessKeyId,
    secretKey: info.secretAccessKey,
  };
}

function stubConnection(port: number) {
  return {
    endPoint: "127.0.0.1",
    port,
    region: "us-east-1",
    accessKey: "a-key",
    secretKey: "a-secret",
  };
}

function clientFor(info: ObjectServerInfo): Minio.Client {
  const c = connection(info);
  return new Minio.Client({ ...c, useSSL: false });
}

async function createBucket(info: ObjectServerInfo): Promise<string> {
  const bucket = `spillway-minio-${randomBytes(6).toString("hex")}`;
  await clientFor(info).makeBucket(bucket, info.region);
  return bucket;
}

/** Empties a bucket (objects and incomplete uploads) and removes it. */
async function removeBucket(info: ObjectServerInfo, bucket: string): Promise<void> {
  const client = clientFor(info);
  const names: string[] = [];
  for await (const item of client.listObjectsV2(bucket, "", true)) {
    if (typeof item.name === "string") names.push(item.name);
  }
  if (names.length > 0) await client.removeObjects(bucket, names);
  for (const upload of await incompleteUploads(client, bucket)) {
    await client.abortMultipartUpload(bucket, upload.key, upload.uploadId);
  }
  await client.removeBucket(bucket);
}

async function incompleteUploads(
  client: Minio.Client,
  bucket: string,
): Promise<{ key: string; uploadId: string }[]> {
  const uploads: { key: string; uploadId: string }[] = [];
  for await (const upload of client.listIncompleteUploads(bucket, "", true)) {
    uploads.push({ key: upload.key, uploadId: upload.uploadId });
  }
  return uploads;
}

async function errorOf(pending: Promise<unknown>): Promise<ConnectError> {
  try {
    await pending;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error("expected the call to fail");
}

async function rawErrorOf(pending: Promise<unknown>): Promise<unknown> {
  try {
    await pending;
  } catch (err) {
    return err;
  }
  return new Error("the call succeeded");
}

function listenHttp(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ port: number; close: () => Promise<void> }> {
  return listenNet(createHttpServer(handler));
}

async function listenNet(
  server: NetServer | HttpServer,
): Promise<{ port: number; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        if ("closeAllConnections" in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Yields payload in chunks whose sizes cycle through sizes, each a fresh copy. */
async function* chunked(payload: Uint8Array, sizes: readonly number[]): AsyncGenerator<Uint8Array> {
  let at = 0;
  for (let i = 0; at < payload.byteLength; i++) {
    const size = sizes[i % sizes.length] ?? 1;
    yield payload.slice(at, at + size);
    at += size;
  }
}

function unique(): string {
  return `t-${randomBytes(6).toString("hex")}/`;
}

function text(value: string): Uint8Array {
  return new TextEncoder().encode(value);
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}
