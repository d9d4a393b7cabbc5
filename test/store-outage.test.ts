import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createS3Backend } from "../server/src/backends/s3.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { codeOf } from "./support/code-of.js";
import { type ObjectServer, startObjectServer } from "./support/object-server.js";
import { readBack, sha256 } from "./support/read-back.js";
import { createTestS3Client } from "./support/s3-client.js";

/** Resolves waits on conditions over counters that workers bump as they go. */
function createProgress() {
  const waiting: { ready: () => boolean; resolve: () => void }[] = [];
  return {
    bump() {
      for (const w of [...waiting]) {
        if (w.ready()) {
          waiting.splice(waiting.indexOf(w), 1);
          w.resolve();
        }
      }
    },
    until(ready: () => boolean): Promise<void> {
      if (ready()) return Promise.resolve();
      return new Promise((resolve) => waiting.push({ ready, resolve }));
    },
  };
}

/** payload makes `size` bytes of numbered lines unique to seed. */
function payload(seed: string, size: number): Buffer {
  const line = `${seed} ${sha256(seed)}\n`;
  return Buffer.from(line.repeat(Math.ceil(size / line.length)).slice(0, size));
}

/**
 * A Spillway server on the s3 backend keeps serving while its MinIO is down — every call
 * answers UNAVAILABLE — and serves again, committed data intact, once MinIO is back, without
 * a restart of Spillway: between calls, and with MinIO stopped under six workers' mixed load
 * of offloads (60 KB and 3 MiB) and reads.
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

  it("answers only UNAVAILABLE when the store stops under concurrent load, and loses nothing acknowledged", async () => {
    // No SDK retries: every answer the server gives is seen as it is.
    const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    const runId = "load";
    const acked: { handle: string; sha: string }[] = [];
    const failedOffloads: { handle: string; sha: string }[] = [];
    // Each code seen, with its first message: a failure then says which limit or store answer it was.
    const codes = new Map<string, string>();
    let phase: "up" | "down" | "back" = "up";
    let failuresWhileDown = 0;
    let successesWhenBack = 0;
    let stop = false;
    let inFlight = 0;
    const progress = createProgress();

    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const callPhase = phase;
        const target = acked[(w * 7 + i) % Math.max(acked.length, 1)];
        const reading = i % 3 === 2 && target !== undefined;
        const callId = `w${w}-${i}`;
        const data = payload(callId, i % 2 === 0 ? 3 * 1024 * 1024 : 60_000);
        inFlight++;
        try {
          if (reading && target !== undefined) {
            expect(sha256(await readBack(spillway, runId, target.handle))).toBe(target.sha);
          } else {
            const att = await spillway.offload({ tenant: "dev", runId, callId }, data);
            expect(att.sha256).toBe(sha256(data));
            acked.push({ handle: att.handle, sha: sha256(data) });
          }
          if (callPhase === "back" && phase === "back") successesWhenBack++;
        } catch (err) {
          const { code, rawMessage } = ConnectError.from(err);
          if (!codes.has(Code[code])) codes.set(Code[code], rawMessage);
          if (!reading) failedOffloads.push({ handle: `res_${callId}`, sha: sha256(data) });
          if (phase === "down") failuresWhileDown++;
          // A refused call comes back at once; pause so the workers do not spin.
          await new Promise((resolve) => setTimeout(resolve, 20));
        } finally {
          inFlight--;
        }
        progress.bump();
      }
    };
    const workers = Promise.all([0, 1, 2, 3, 4, 5].map(worker));

    await progress.until(() => acked.length >= 6);
    const inFlightAtStop = inFlight;
    await minio.pause();
    phase = "down";
    await progress.until(() => failuresWhileDown >= 12);
    expect((await spillway.raw.getServerInfo({})).backend).toBe("s3");
    await minio.restart();
    phase = "back";
    await progress.until(() => successesWhenBack >= 12);
    stop = true;
    await workers;

    expect(inFlightAtStop).toBeGreaterThan(0);
    expect(Object.fromEntries(codes)).toEqual({ Unavailable: expect.any(String) });
    for (const a of acked) {
      expect(sha256(await readBack(spillway, runId, a.handle))).toBe(a.sha);
    }
    // An offload that failed is absent or, when it committed before the failure, whole.
    for (const f of failedOffloads) {
      const code = await codeOf(spillway.stat(runId, f.handle));
      if (code === undefined) expect((await spillway.stat(runId, f.handle)).sha256).toBe(f.sha);
      else expect(code).toBe(Code.PermissionDenied);
    }
  });
});
