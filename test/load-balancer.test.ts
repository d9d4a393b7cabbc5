import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import type { OffloadRequest } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nginxGrpcProxyConfig, type RunningNginx, startNginx } from "./support/nginx.js";
import { type ObjectServer, startObjectServer } from "./support/object-server.js";
import { readBack, sha256 } from "./support/read-back.js";
import { s3BackendFlags } from "./support/s3-backend-flags.js";
import { createTestS3Client } from "./support/s3-client.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const tenant = "dev";

/** spawnReplica starts one `spillway serve` replica on the shared bucket. */
function spawnReplica(minio: ObjectServer, bucket: string): Promise<SpillwayProcess> {
  const { args, env } = s3BackendFlags(minio, bucket);
  return spawnSpillway([...args, "--grace-ms", "1000"], env);
}

/** payload makes `size` bytes of lines that differ per seed, so every offload is distinct. */
function payload(seed: string, size: number): Uint8Array {
  const line = `${seed} ${sha256(seed)}\n`;
  return Buffer.from(line.repeat(Math.ceil(size / line.length)).slice(0, size));
}

/** pool runs task(0..count-1) with at most `width` in flight and settles every one. */
async function pool(count: number, width: number, task: (i: number) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
}

/**
 * offloadAttempts is an interceptor counting Offload attempts per `run/call`: the SDK's retries
 * each pass through it, so a count above one means the offload was retried.
 */
function offloadAttempts(): { interceptor: Interceptor; counts: Map<string, number> } {
  const counts = new Map<string, number>();
  const interceptor: Interceptor = (next) => (req) => {
    if (!req.stream || req.method.name !== "Offload") return next(req);
    const messages = req.message as AsyncIterable<OffloadRequest>;
    async function* counted() {
      for await (const m of messages) {
        if (m.msg.case === "header") {
          const id = `${m.msg.value.key?.runId}/${m.msg.value.key?.callId}`;
          counts.set(id, (counts.get(id) ?? 0) + 1);
        }
        yield m;
      }
    }
    return next({ ...req, message: counted() });
  };
  return { interceptor, counts };
}

/**
 * Stateless replicas behind a real nginx: three `spillway serve` processes share one private
 * MinIO bucket, nginx spreads gRPC calls over them, and one replica is killed with SIGKILL in
 * the middle of a mixed load.
 */
describe("load balancer: replicas behind nginx", () => {
  let minio: ObjectServer | undefined;
  let nginx: RunningNginx | undefined;
  const replicas: SpillwayProcess[] = [];

  beforeAll(async () => {
    minio = await startObjectServer("minio");
    const bucket = "spillway-lb";
    const s3 = createTestS3Client(minio);
    try {
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    } finally {
      s3.destroy();
    }
    const server = minio;
    replicas.push(...(await Promise.all([1, 2, 3].map(() => spawnReplica(server, bucket)))));
    nginx = await startNginx({ upstreams: replicas.map((r) => new URL(r.url).host) });
  });

  afterAll(async () => {
    for (const replica of replicas) replica.kill();
    await Promise.allSettled([...replicas.map((r) => r.exited), nginx?.stop(), minio?.stop()]);
  });

  it("serves every handle from every replica, whichever one wrote it", async () => {
    const proxy = createSpillwayClient({ baseUrl: nginx?.url ?? "" });
    const written: { runId: string; handle: string; sha: string }[] = [];
    await pool(60 * 3, 8, async (i) => {
      const runId = `spread-${Math.floor(i / 3)}`;
      const data = payload(`${runId}/${i}`, 1_000 + ((i * 7919) % 200_000));
      const att = await proxy.offload({ tenant, runId, callId: `call-${i % 3}` }, data);
      expect(att.sha256).toBe(sha256(data));
      written.push({ runId, handle: att.handle, sha: sha256(data) });
    });
    expect(written).toHaveLength(180);

    const direct = replicas.map((r) => createSpillwayClient({ baseUrl: r.url }));
    const readers = [proxy, ...direct];
    await pool(written.length * readers.length, 8, async (n) => {
      const w = written[n % written.length];
      const reader = readers[Math.floor(n / written.length)];
      if (w === undefined || reader === undefined) throw new Error("index out of range");
      expect(sha256(await readBack(reader, w.runId, w.handle))).toBe(w.sha);
    });

    // nginx's access log names the replica behind each call: the offloads went to all three.
    const log = await readFile(nginx?.accessLog ?? "", "utf8");
    const offloadTargets = new Set(
      log
        .split("\n")
        .filter((l) => l.includes("/spillway.v1.SpillwayService/Offload "))
        .map((l) => l.split(" ").at(-1)),
    );
    expect([...offloadTargets].sort()).toEqual(replicas.map((r) => new URL(r.url).host).sort());
  }, 180_000);

  it("keeps every acknowledged offload when a replica is killed with SIGKILL mid-load", async () => {
    const { interceptor, counts } = offloadAttempts();
    const proxy = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      interceptors: [interceptor],
      retry: { maxAttempts: 5, baseDelayMs: 50, maxDelayMs: 500 },
    });
    const victim = replicas[0];
    if (victim === undefined) throw new Error("no replicas");
    const operations = 200;
    const killAfter = 60;
    const acked: { runId: string; callId: string; handle: string; sha: string }[] = [];
    const sent = new Map<string, string>();
    const errors: { op: number; kind: string; code: Code; message: string }[] = [];
    let done = 0;
    let inFlightAtKill = -1;
    let inFlight = 0;

    await pool(operations, 8, async (i) => {
      inFlight++;
      const runId = `kill-${i % 10}`;
      const readable = acked[(i * 31) % Math.max(1, acked.length)];
      const isRead = i % 4 === 3 && readable !== undefined;
      try {
        if (isRead) {
          const data = await readBack(proxy, readable.runId, readable.handle);
          expect(sha256(data)).toBe(readable.sha);
        } else {
          const callId = `call-${i}`;
          // Mostly several 1 MiB chunks, so a replica dies with uploads streaming through it.
          const data = payload(`${runId}/${callId}`, i % 5 === 0 ? 20_000 : 3_500_000);
          sent.set(`${runId}/${callId}`, sha256(data));
          const res = await proxy.offloadResult({ tenant, runId, callId }, data, undefined, {
            timeoutMs: 30_000,
          });
          expect(res.attachment.sha256).toBe(sha256(data));
          acked.push({ runId, callId, handle: res.attachment.handle, sha: sha256(data) });
        }
      } catch (err) {
        if (!(err instanceof ConnectError)) throw err;
        errors.push({
          op: i,
          kind: isRead ? "read" : "offload",
          code: err.code,
          message: err.rawMessage,
        });
      } finally {
        inFlight--;
        done++;
        if (done === killAfter) {
          inFlightAtKill = inFlight;
          victim.kill();
        }
      }
    });
    expect((await victim.exited).signal).toBe("SIGKILL");
    expect(inFlightAtKill).toBeGreaterThan(0);

    const retried = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
    console.info(
      `kill -9 under load: ${operations} operations, ${errors.length} saw an error ` +
        `(${errors.map((e) => `${e.kind} ${Code[e.code]}`).join(", ") || "none"}), ` +
        `${retried.length} offloads retried, ${acked.length} offloads acknowledged`,
    );
    // A call the dead replica held before answering fails as nginx's 502, which gRPC clients
    // read as UNAVAILABLE. A call whose stream nginx had already started is reset
    // (RST_STREAM INTERNAL_ERROR); reads and offloads are idempotent and the SDK repeats them on
    // either, so callers see at most UNAVAILABLE, and only once retries are exhausted.
    expect(errors.filter((e) => e.code !== Code.Unavailable)).toEqual([]);
    expect(errors.length).toBeLessThan(operations / 10);

    // Every acknowledged offload reads back, through nginx and from each surviving replica.
    const readers = [
      proxy,
      ...replicas.slice(1).map((r) => createSpillwayClient({ baseUrl: r.url })),
    ];
    await pool(acked.length * readers.length, 8, async (n) => {
      const a = acked[n % acked.length];
      const reader = readers[Math.floor(n / acked.length)];
      if (a === undefined || reader === undefined) throw new Error("index out of range");
      expect(sha256(await readBack(reader, a.runId, a.handle))).toBe(a.sha);
    });

    // One committed record per call id, with the bytes that were sent; acknowledged (and
    // retried) offloads exactly one.
    const records = new Map<string, string[]>();
    for (let r = 0; r < 10; r++) {
      for await (const att of proxy.listAll(`kill-${r}`)) {
        const id = `kill-${r}/${att.key?.callId}`;
        records.set(id, [...(records.get(id) ?? []), att.sha256]);
      }
    }
    for (const [id, shas] of records) {
      expect(shas, id).toEqual([sent.get(id)]);
    }
    for (const a of acked) {
      expect(records.get(`${a.runId}/${a.callId}`)).toEqual([a.sha]);
    }
    for (const id of retried) {
      expect(records.get(id), id).toHaveLength(1);
    }
  }, 180_000);

  it("lets the CLI's HTTP/1.1 bulk reads fall back to HTTP/2 through an h2c-only nginx", async () => {
    const seen: string[] = [];
    const contentType: Interceptor = (next) => async (req) => {
      const res = await next(req);
      if (req.method.name === "ReadToolOutput") seen.push(res.header.get("content-type") ?? "");
      return res;
    };
    const proxy = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      bulkReads: "http1",
      interceptors: [contentType],
    });
    const data = payload("bulk-through-nginx", 3 * 1024 * 1024 + 17);
    const att = await proxy.offload({ tenant, runId: "bulk-nginx", callId: "a" }, data);
    for (let read = 0; read < 2; read++) {
      const chunks: Uint8Array[] = [];
      for await (const chunk of proxy.readBytes("bulk-nginx", att.handle)) {
        chunks.push(Buffer.from(chunk));
      }
      expect(sha256(Buffer.concat(chunks))).toBe(sha256(data));
    }
    // The first HTTP/1.1 attempt got no gRPC-Web answer; both reads came over HTTP/2.
    expect(seen).toEqual(["application/grpc+proto", "application/grpc+proto"]);
  }, 60_000);

  it("documents the nginx config the test runs", async () => {
    const docs = await readFile(join(root, "docs/operations.md"), "utf8");
    const upstreams = ["10.0.0.11:50051", "10.0.0.12:50051", "10.0.0.13:50051"];
    expect(docs).toContain(nginxGrpcProxyConfig(upstreams, "0.0.0.0:50051"));
    expect(nginx?.config).toContain("grpc_pass grpc://spillway;");
  });
});
