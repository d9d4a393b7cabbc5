import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  CreateBucketCommand,
  GetBucketLifecycleConfigurationCommand,
  ListMultipartUploadsCommand,
  PutBucketLifecycleConfigurationCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createS3Backend } from "../server/src/backends/s3.js";
import { failureOf } from "./support/code-of.js";
import { startMinioServer } from "./support/minio-server.js";
import {
  type ObjectServer,
  type ObjectServerInfo,
  objectServerKinds,
  waitFor,
} from "./support/object-server.js";
import { s3BackendFlags } from "./support/s3-backend-flags.js";
import { createTestS3Client } from "./support/s3-client.js";
import { spawnSpillway, spillwayCli } from "./support/spawn-spillway.js";

const run = promisify(execFile);

/**
 * Whether a server keeps an `AbortIncompleteMultipartUpload` lifecycle rule: MinIO refuses a
 * rule with only that action as malformed and drops it beside another action.
 */
const abortIncompleteRuleSupport: Readonly<Record<ObjectServerInfo["kind"], boolean>> = {
  minio: false,
  seaweedfs: true,
  moto: true,
};

const backendFor = (info: ObjectServerInfo, bucket: string, prefix: string) =>
  createS3Backend({
    bucket,
    prefix,
    endpoint: info.endpoint,
    region: info.region,
    forcePathStyle: true,
    partSizeBytes: 5 * 1024 * 1024,
    credentials: { accessKeyId: info.accessKeyId, secretAccessKey: info.secretAccessKey },
  });

/** The keys of the bucket's incomplete uploads, listed as a sweep lists them, or for one key. */
async function uploadsListed(s3: S3Client, bucket: string, key?: string): Promise<string[]> {
  const out = await s3.send(
    new ListMultipartUploadsCommand({
      Bucket: bucket,
      ...(key === undefined ? {} : { Prefix: key }),
    }),
  );
  return (out.Uploads ?? []).map((u) => u.Key ?? "");
}

/** Files under MinIO's store of multipart parts, found from its command line. */
function minioPartFiles(pid: number): string[] {
  const data = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[2] ?? "";
  const dir = join(data, ".minio.sys", "multipart");
  return existsSync(dir)
    ? readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => e.name)
    : [];
}

describe("multipart uploads cut off by a crash of MinIO itself", () => {
  let minio: ObjectServer;
  let s3: S3Client;
  const bucket = "crashed-uploads";

  beforeAll(async () => {
    // MinIO's own expiry of stale uploads, shortened from its 24 h default so the test sees it.
    minio = await startMinioServer({
      env: {
        MINIO_API_STALE_UPLOADS_EXPIRY: "40s",
        MINIO_API_STALE_UPLOADS_CLEANUP_INTERVAL: "5s",
      },
    });
    s3 = createTestS3Client(minio);
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  });
  afterAll(async () => {
    s3.destroy();
    await minio.stop();
  });

  it("are forgotten by MinIO's listing after a kill -9, refused a lifecycle rule, and expired by MinIO itself", async () => {
    const backend = backendFor(minio, bucket, "spill");
    const stop = new AbortController();
    // A 5 MiB part is sent, then the body waits: the upload is in flight when MinIO dies.
    const body = (async function* () {
      yield new Uint8Array(6 * 1024 * 1024).fill(7);
      await new Promise((_, reject) =>
        stop.signal.addEventListener("abort", () => reject(stop.signal.reason)),
      );
    })();
    const put = backend.put("t/dev/r/run/b/call/upload1", body, { signal: stop.signal });
    put.catch(() => undefined);
    const key = "spill/t/dev/r/run/b/call/upload1";
    await waitFor(async () => (await uploadsListed(s3, bucket)).includes(key), 30_000);
    await waitFor(async () => minioPartFiles(minio.pid() ?? 0).length > 0, 30_000);

    const pid = minio.pid() ?? 0;
    process.kill(pid, "SIGKILL");
    // Reaped: the harness sees the exit before restart() looks at the process.
    await waitFor(async () => !existsSync(`/proc/${pid}`), 10_000);
    await new Promise((resolve) => setImmediate(resolve));
    // The put gives up while MinIO is down, so its own abort of the upload cannot reach it.
    stop.abort(new Error("writer gave up"));
    await failureOf(put);
    await minio.restart();

    // Why the sweep reported no leftovers: MinIO lists uploads without a whole key from memory.
    expect(await uploadsListed(s3, bucket)).toEqual([]);
    expect(await uploadsListed(s3, bucket, key)).toEqual([key]);
    const flags = s3BackendFlags(minio, bucket, { prefix: "spill" });
    const { stdout } = await run(
      process.execPath,
      [spillwayCli, "sweep", ...flags.args, "--orphan-age-ms", "0"],
      { env: { ...process.env, ...flags.env } },
    );
    expect(JSON.parse(stdout).leftovers).toBe(0);
    // Nor does MinIO keep a lifecycle rule that would abort it; the server says so at start.
    const refused = await failureOf(backend.expireIncompleteUploads?.(1) ?? Promise.resolve());
    expect(refused.code).toBe(Code.Unimplemented);

    // MinIO removes stale uploads on its own (MINIO_API_STALE_UPLOADS_EXPIRY, default 24 h).
    await waitFor(async () => (await uploadsListed(s3, bucket, key)).length === 0, 120_000);
    expect(minioPartFiles(minio.pid() ?? 0)).toEqual([]);
    await backend.close();
  }, 240_000);
});

describe.each(objectServerKinds)("AbortIncompleteMultipartUpload lifecycle rule on %s", (kind) => {
  const info = inject("objectServers")[kind];
  const supported = abortIncompleteRuleSupport[kind];
  let s3: S3Client;
  beforeAll(() => {
    s3 = createTestS3Client(info);
  });
  afterAll(() => s3.destroy());

  const rules = async (bucket: string) =>
    (await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules ?? [];

  it(
    supported
      ? "is added once, beside the operator's rules, and then found"
      : "is refused as UNIMPLEMENTED",
    async () => {
      const bucket = `lifecycle-${kind}-${Date.now()}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const backend = backendFor(info, bucket, "spill");
      if (!supported) {
        expect(
          (await failureOf(backend.expireIncompleteUploads?.(1) ?? Promise.resolve())).code,
        ).toBe(Code.Unimplemented);
        return;
      }
      await s3.send(
        new PutBucketLifecycleConfigurationCommand({
          Bucket: bucket,
          LifecycleConfiguration: {
            Rules: [
              {
                ID: "operator",
                Status: "Enabled",
                Filter: { Prefix: "logs/" },
                Expiration: { Days: 30 },
              },
            ],
          },
        }),
      );
      expect(await backend.expireIncompleteUploads?.(1)).toBe("added");
      const after = await rules(bucket);
      expect(after.map((r) => r.ID)).toContain("operator");
      expect(after.find((r) => r.ID?.startsWith("spillway-"))).toMatchObject({
        Status: "Enabled",
        Filter: { Prefix: "spill/" },
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
      });
      expect(await backend.expireIncompleteUploads?.(1)).toBe("present");
      expect(await rules(bucket)).toHaveLength(2);
      await backend.close();
    },
  );
});

describe("spillway serve at start", () => {
  const info = inject("objectServers").moto;

  it("puts the AbortIncompleteMultipartUpload rule on its bucket, unless told to leave it alone", async () => {
    const s3 = createTestS3Client(info);
    const bucket = `serve-lifecycle-${Date.now()}`;
    const untouched = `${bucket}-untouched`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new CreateBucketCommand({ Bucket: untouched }));
    const serving = s3BackendFlags(info, bucket);
    const leftAlone = s3BackendFlags(info, untouched);
    const server = await spawnSpillway(
      [...serving.args, "--abort-incomplete-uploads-days", "2"],
      serving.env,
    );
    const alone = await spawnSpillway(
      [...leftAlone.args, "--abort-incomplete-uploads-days", "0"],
      leftAlone.env,
    );
    await Promise.all([server.stop(), alone.stop()]);
    const rules = (await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket })))
      .Rules;
    expect(rules?.map((r) => r.AbortIncompleteMultipartUpload?.DaysAfterInitiation)).toEqual([2]);
    const untouchedAnswer = await s3
      .send(new GetBucketLifecycleConfigurationCommand({ Bucket: untouched }))
      .then(
        () => "a configuration",
        (err: unknown) => (err as { name?: string }).name,
      );
    expect(untouchedAnswer).toBe("NoSuchLifecycleConfiguration");
    s3.destroy();
  });
});
