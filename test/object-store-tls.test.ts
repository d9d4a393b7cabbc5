import { randomBytes } from "node:crypto";
import { CreateBucketCommand, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import { Code } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failureOf } from "./support/code-of.js";
import { startMinioServer } from "./support/minio-server.js";
import type { ObjectServer } from "./support/object-server.js";
import { sha256 } from "./support/read-back.js";
import { s3BackendFlags } from "./support/s3-backend-flags.js";
import { createTestS3Client } from "./support/s3-client.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/**
 * The object-store backends over HTTPS, as the docs advise for any link that is not private:
 * a MinIO serving a self-signed certificate, trusted by the Spillway process through
 * `NODE_EXTRA_CA_CERTS` (nothing Spillway-specific), and refused when it is not trusted.
 */
describe("object store over HTTPS", () => {
  let minio: ObjectServer;
  let admin: S3Client;
  const bucket = "spillway-tls";

  beforeAll(async () => {
    minio = await startMinioServer({ tls: true });
    admin = createTestS3Client(minio);
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  });

  afterAll(async () => {
    admin?.destroy();
    await minio?.stop();
  });

  /** Starts `spillway serve` on `backend` against the TLS MinIO, with `env` added. */
  function serve(backend: "s3" | "minio", prefix: string, env: Record<string, string>) {
    const flags = s3BackendFlags(minio, bucket, { backend, prefix });
    return spawnSpillway(flags.args, { ...flags.env, ...env });
  }

  for (const backend of ["s3", "minio"] as const) {
    it(`offloads and reads back whole through the ${backend} backend, trusting the store's certificate`, async () => {
      const server = await serve(backend, `trusted-${backend}`, {
        NODE_EXTRA_CA_CERTS: minio.caFile ?? "",
      });
      try {
        const client = createSpillwayClient({ baseUrl: server.url });
        // One payload above the 8 MiB part size (a multipart upload), one of a single put.
        for (const size of [9 * 1024 * 1024 + 7, 200_000]) {
          const payload = randomBytes(size);
          const record = await client.offload(
            { tenant: "dev", runId: "tls", callId: `c${size}` },
            payload,
          );
          const parts: Uint8Array[] = [];
          for await (const part of client.readBytes("tls", record.handle, {}, { verify: true })) {
            parts.push(part);
          }
          expect(sha256(Buffer.concat(parts))).toBe(sha256(payload));
        }
        const stored = await admin.send(
          new ListObjectsV2Command({ Bucket: bucket, Prefix: `trusted-${backend}/` }),
        );
        expect(stored.KeyCount ?? 0).toBeGreaterThan(0);
      } finally {
        await server.stop();
      }
    });

    it(`answers FAILED_PRECONDITION while the ${backend} backend does not trust the store, and keeps serving`, async () => {
      let server: SpillwayProcess | undefined;
      try {
        server = await serve(backend, `untrusted-${backend}`, {});
        const client = createSpillwayClient({ baseUrl: server.url });
        const err = await failureOf(
          client.offload({ tenant: "dev", runId: "tls", callId: "refused" }, randomBytes(100_000)),
        );
        expect(err.code).toBe(Code.FailedPrecondition);
        expect(err.rawMessage).toContain("certificate");
        expect((await client.raw.getServerInfo({})).backend).toBe(backend);
      } finally {
        await server?.stop();
      }
    });
  }
});
