import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSpillwayClient } from "../clients/ts/src/client.js";
import { createS3Backend } from "../server/backends/s3.js";
import { type SpillwayServer, startSpillwayServer } from "../server/server.js";
import { codeOf } from "./support/code-of.js";
import { type ObjectServer, startObjectServer } from "./support/object-server.js";
import { createTestS3Client } from "./support/s3-client.js";

/**
 * A Spillway server on the s3 backend keeps serving while its MinIO is down — every call
 * answers UNAVAILABLE — and serves again, committed data intact, once MinIO is back, without
 * a restart of Spillway.
 */
describe("store outage", () => {
  let minio: ObjectServer;
  let server: SpillwayServer;

  beforeAll(async () => {
    minio = await startObjectServer("minio");
    const s3 = createTestS3Client(minio);
    await s3.send(new CreateBucketCommand({ Bucket: "outage" }));
    s3.destroy();
    server = await startSpillwayServer({
      backend: createS3Backend({
        bucket: "outage",
        endpoint: minio.endpoint,
        region: minio.region,
        forcePathStyle: true,
        credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
      }),
      port: 0,
    });
  });
  afterAll(async () => {
    await server.close(1000);
    await minio.stop();
  });

  it("answers UNAVAILABLE while the store is down and recovers when it returns", async () => {
    const spillway = createSpillwayClient({ baseUrl: server.url });
    const key = (callId: string) => ({ tenant: "dev", runId: "r", callId });
    await spillway.offload(key("before"), `${"kept line\n".repeat(10_000)}`);

    await minio.pause();
    expect(await codeOf(spillway.offload(key("during"), "x".repeat(100_000)))).toBe(
      Code.Unavailable,
    );
    expect(await codeOf(spillway.readToolOutput({ runId: "r", handle: "res_before" }))).toBe(
      Code.Unavailable,
    );
    expect((await spillway.raw.getServerInfo({})).backend).toBe("s3");

    await minio.restart();
    const read = await spillway.readToolOutput({ runId: "r", handle: "res_before" });
    expect(read.rendered).toContain("     1\tkept line\n");
    const after = await spillway.offload(key("after"), "after the outage\n");
    expect(after.handle).toBe("res_after");
  });
});
