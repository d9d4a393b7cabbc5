import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { afterAll, describe, expect, inject, it } from "vitest";
import { readBack } from "./support/read-back.js";
import { s3BackendFlags } from "./support/s3-backend-flags.js";
import { createTestS3Client } from "./support/s3-client.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** Outputs the child merges: enough that a merge takes long enough to be killed mid-way. */
const outputs = 400;

/** Where the server keeps its objects, seen from the test: every key under a run's prefix. */
interface Target {
  readonly name: string;
  readonly args: string[];
  readonly env: Record<string, string>;
  keysUnder(prefix: string): Promise<string[]>;
}

const servers: SpillwayProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const server of servers) server.kill();
  await Promise.allSettled(servers.map((s) => s.exited));
  for (const cleanup of cleanups) await cleanup();
});

async function filesystemTarget(): Promise<Target> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-merge-crash-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return {
    name: "filesystem",
    args: ["--backend", "filesystem", "--data-dir", dir],
    env: {},
    async keysUnder(prefix) {
      try {
        const entries = await readdir(join(dir, prefix), { recursive: true, withFileTypes: true });
        return entries
          .filter((e) => e.isFile() && !e.name.startsWith(".tmp-"))
          .map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw err;
      }
    },
  };
}

async function s3Target(kind: "minio" | "seaweedfs" | "moto"): Promise<Target> {
  const server = inject("objectServers")[kind];
  const bucket = `merge-crash-${randomBytes(4).toString("hex")}`;
  const prefix = "mc";
  const s3: S3Client = createTestS3Client(server);
  cleanups.push(async () => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  return {
    name: `s3/${kind}`,
    ...s3BackendFlags(server, bucket, { prefix }),
    async keysUnder(under) {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const out = await s3.send(
          new ListObjectsV2Command({
            Bucket: bucket,
            Prefix: `${prefix}/${under}`,
            ...(token === undefined ? {} : { ContinuationToken: token }),
          }),
        );
        for (const o of out.Contents ?? []) {
          if (o.Key !== undefined) keys.push(o.Key.slice(prefix.length + 1));
        }
        token = out.IsTruncated === true ? out.NextContinuationToken : undefined;
      } while (token !== undefined);
      return keys;
    },
  };
}

async function handles(sdk: SpillwayClient, runId: string): Promise<string[]> {
  const out: string[] = [];
  for await (const a of sdk.listAll(runId)) out.push(a.handle);
  return out.sort();
}

/**
 * crashMidMerge starts a merge of `outputs` outputs, kills the server with SIGKILL once at
 * least `killAfter` of the parent's merged records are written and before the merge commits,
 * and restarts it on the same store. Returns the new server's client and what the store held
 * at the kill.
 */
async function crashMidMerge(target: Target, parent: string, child: string, killAfter: number) {
  let server = await spawnSpillway(target.args, target.env);
  servers.push(server);
  let sdk = createSpillwayClient({ baseUrl: server.url });
  await sdk.offload({ tenant: "dev", runId: parent, callId: "base" }, "base\n");
  await sdk.forkRun(parent, child);
  await Promise.all(
    Array.from({ length: outputs }, (_, i) =>
      sdk.offload(
        { tenant: "dev", runId: child, callId: `c${i}` },
        i % 50 === 0 ? `big ${i}\n${"line\n".repeat(20_000)}` : `output ${i}\n`,
      ),
    ),
  );
  const runKeys = `t/dev/r/${parent}/`;
  const merge = sdk.mergeRun(child, parent).then(
    () => "finished",
    (err: unknown) => ConnectError.from(err).code,
  );
  let atKill: string[] = [];
  for (;;) {
    atKill = await target.keysUnder(runKeys);
    const records = atKill.filter((k) => k.startsWith(`${runKeys}h/`)).length - 1;
    if (records >= killAfter) break;
    await new Promise((r) => setTimeout(r, 2));
  }
  server.kill("SIGKILL");
  await server.exited;
  // The merge never finished: it had no outcome when the store was listed.
  expect(atKill.filter((k) => k.startsWith(`${runKeys}m/o/`))).toEqual([]);
  expect(atKill.filter((k) => k.startsWith(`${runKeys}m/i/`))).toHaveLength(1);
  expect(await merge).not.toBe("finished");
  server = await spawnSpillway(target.args, target.env);
  servers.push(server);
  sdk = createSpillwayClient({ baseUrl: server.url });
  return { sdk, server, atKill };
}

const targets: [string, () => Promise<Target>][] = [
  ["filesystem", filesystemTarget],
  ["s3 on MinIO", () => s3Target("minio")],
  ["s3 on SeaweedFS", () => s3Target("seaweedfs")],
  // moto keeps its objects in its own process, which outlives the killed server.
  ["s3 on moto", () => s3Target("moto")],
];

describe("MergeRun: kill -9 mid-merge", () => {
  it.each(targets)(
    "%s: a reader sees none of the merge after the restart, the retried merge completes it",
    async (_, make) => {
      const target = await make();
      for (const [trial, killAfter] of [1, outputs / 4].entries()) {
        const [parent, child] = [`p${trial}`, `c${trial}`];
        const { sdk, server, atKill } = await crashMidMerge(target, parent, child, killAfter);
        const written = atKill.filter((k) => k.startsWith(`t/dev/r/${parent}/h/`)).length - 1;

        // None of it shows: not listed, not readable, not counted.
        expect(await handles(sdk, parent)).toEqual(["res_base"]);
        const run = (await sdk.raw.listRuns({})).runs.find((r) => r.runId === parent);
        expect(run?.outputCount).toBe(1n);
        // A handle whose record the killed merge did write: unreadable, not merely absent.
        const pendingHandle = atKill
          .find((k) => k.startsWith(`t/dev/r/${parent}/h/res_c`))
          ?.slice(`t/dev/r/${parent}/h/`.length);
        expect(pendingHandle).toMatch(/^res_c[0-9]+$/);
        await expect(
          sdk.readToolOutput({ runId: parent, handle: pendingHandle ?? "" }),
        ).rejects.toMatchObject({ code: Code.PermissionDenied });
        // A fork of the parent now copies none of it either.
        expect((await sdk.forkRun(parent, `${parent}-fork`)).forkedAttachments).toBe(1n);

        // The retry rolls the journal forward: everything shows, counted as merged.
        const res = await sdk.mergeRun(child, parent);
        expect(res.mergedAttachments + res.unchangedAttachments).toBe(BigInt(outputs));
        expect(res.mergedAttachments).toBe(BigInt(outputs));
        const all = await handles(sdk, parent);
        expect(all).toHaveLength(outputs + 1);
        expect((await target.keysUnder(`t/dev/r/${parent}/m/i/`)).length).toBe(0);
        // And the child's deletion keeps the bytes the parent uses.
        await sdk.deleteRun(child);
        expect((await readBack(sdk, parent, "res_c0")).toString()).toBe(
          `big 0\n${"line\n".repeat(20_000)}`,
        );
        expect((await readBack(sdk, parent, "res_c7")).toString()).toBe("output 7\n");
        console.log(
          `merge crash ${target.name}: killed with ${written}/${outputs} records written; retry merged ${res.mergedAttachments}`,
        );
        await server.stop();
      }
    },
    300_000,
  );
});
