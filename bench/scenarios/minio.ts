import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { createSpillwayClient } from "@spillway/client";
import { startObjectServer } from "../../test/support/object-server.js";
import { createTestS3Client } from "../../test/support/s3-client.js";
import { spawnSpillway } from "../../test/support/spawn-spillway.js";
import { textPayload } from "../payload.js";
import { metered, type SideCpu } from "../process-cpu.js";
import { type BenchResult, throughputResult } from "../result.js";
import { alternate } from "../timing.js";

/**
 * minioScenarios measures `offload_256mib_minio`: an Offload through Spillway's s3 backend into
 * a real MinIO, against lib-storage's `Upload` straight into the same MinIO, same run. Every
 * timed run also meters the CPU of the Spillway server, of MinIO and of this process (the
 * SDK's client, or lib-storage), reported as the row's `cpu_seconds`.
 */
export async function minioScenarios(opts: {
  runs: number;
  bytes: number;
}): Promise<BenchResult[]> {
  const minio = await startObjectServer("minio");
  const s3 = createTestS3Client(minio);
  const bucket = "spillway-bench";
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const credentials = { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey };
  const server = await spawnSpillway(
    [
      "--backend",
      "s3",
      "--s3-bucket",
      bucket,
      "--s3-prefix",
      "spillway",
      "--s3-endpoint",
      minio.endpoint,
      "--s3-region",
      minio.region,
    ],
    {
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
  );
  try {
    const minioPid = minio.pid();
    if (minioPid === undefined) throw new Error("MinIO is not running");
    const processes = { server: server.pid, minio: minioPid, bench: "self" } as const;
    const cpu: SideCpu = { spillway: [], baseline: [] };
    const client = createSpillwayClient({ baseUrl: server.url });
    const data = textPayload(opts.bytes);
    const offload = await alternate(
      opts.runs,
      metered(processes, cpu, "spillway", (run) =>
        client.offload({ tenant: "dev", runId: "bench", callId: `m${run}` }, data),
      ),
      metered(processes, cpu, "baseline", (run) =>
        new Upload({
          client: s3,
          params: { Bucket: bucket, Key: `direct/m${run}`, Body: data },
          partSize: 8 * 1024 * 1024,
          queueSize: 4,
        }).done(),
      ),
    );
    return [
      throughputResult({
        name: "offload_256mib_minio",
        baseline: "lib-storage Upload straight to the same MinIO",
        bytes: opts.bytes,
        ...offload,
        // Issue 26: at least as fast as uploading the bytes straight to the store.
        minRatio: 1.0,
        cpu,
      }),
    ];
  } finally {
    await server.stop();
    s3.destroy();
    await minio.stop();
  }
}
