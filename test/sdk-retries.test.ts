import { randomBytes } from "node:crypto";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createSpillwayClient, isTransientError } from "@spillway/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { freePort } from "./support/free-port.js";
import { type RunningNginx, startNginx } from "./support/nginx.js";
import { attemptCounter, cutFirstOffload } from "./support/offload-cut.js";
import { sha256 } from "./support/read-back.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** Large enough that a read is still streaming when the replica behind it dies. */
const payload = randomBytes(64 * 1024 * 1024);
const digest = sha256(payload);
const patient = { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 500 };
const tenant = "dev";

/**
 * The retry policy of docs/operations.md#retries against real failures, as
 * clients/python/tests/test_retries.py checks it for the Python SDK: one filesystem replica
 * behind a real nginx is killed with SIGKILL in the middle of a call and restarted on the same
 * port and data dir.
 */
describe("SDK retries through nginx around a replica killed mid-call", () => {
  const root = scratchDir("spillway-sdk-retries-");
  let port = 0;
  let dataDir = "";
  let replica: SpillwayProcess | undefined;
  let nginx: RunningNginx | undefined;
  let n = 0;

  const start = async () => {
    replica = await spawnSpillway([
      "--port",
      String(port),
      "--backend",
      "filesystem",
      "--data-dir",
      dataDir,
      "--grace-ms",
      "1000",
    ]);
  };
  const kill = async () => {
    replica?.kill();
    await replica?.exited;
  };

  beforeEach(async () => {
    port = await freePort();
    dataDir = `${root}/store-${n++}`;
    await start();
    nginx = await startNginx({ upstreams: [`127.0.0.1:${port}`] });
  });

  afterEach(async () => {
    await kill();
    await nginx?.stop();
  });

  /** Offloads the payload straight to the replica; returns its handle. */
  async function stored(runId: string): Promise<string> {
    const direct = createSpillwayClient({ baseUrl: replica?.url ?? "" });
    const att = await direct.offload({ tenant, runId, callId: "big" }, payload);
    expect(att.sha256).toBe(digest);
    return att.handle;
  }

  it("surfaces the proxy's reset as a transient INTERNAL when retries are off", async () => {
    const handle = await stored("reset");
    const client = createSpillwayClient({ baseUrl: nginx?.url ?? "", retry: { maxAttempts: 1 } });
    const chunks = client.readBytes("reset", handle);
    await chunks.next();
    await kill();
    await start();
    const err = await (async () => {
      try {
        for await (const _ of chunks) {
          // drained
        }
      } catch (e) {
        return ConnectError.from(e);
      }
      return undefined;
    })();
    expect(err?.code).toBe(Code.Internal);
    expect(err?.rawMessage).toBe("http/2 stream closed with error code INTERNAL_ERROR (0x2)");
    expect(err !== undefined && isTransientError(err)).toBe(true);
  }, 60_000);

  it("readBytes resumes after the reset and reads every byte once", async () => {
    const handle = await stored("resume");
    const { interceptor, count } = attemptCounter();
    const client = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      retry: patient,
      interceptors: [interceptor],
    });
    const chunks = client.readBytes("resume", handle, {}, { verify: true });
    const first = await chunks.next();
    if (first.done === true) throw new Error("no bytes");
    const parts: Uint8Array[] = [Buffer.from(first.value)];
    await kill();
    await start();
    for await (const chunk of chunks) parts.push(Buffer.from(chunk));
    expect(sha256(Buffer.concat(parts))).toBe(digest);
    expect(count.get("ReadToolOutput")).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it("readToolOutput repeats a window whose replica died mid-stream", async () => {
    const handle = await stored("window");
    const { interceptor, count } = attemptCounter();
    let fired = false;
    // The replica dies (and comes back) once the first attempt's first message has arrived.
    const killAfterFirstMessage: Interceptor = (next) => async (req) => {
      const res = await next(req);
      if (!res.stream || req.method.name !== "ReadToolOutput" || fired) return res;
      fired = true;
      const messages = res.message;
      async function* hooked() {
        let first = true;
        for await (const m of messages) {
          yield m;
          if (first) {
            first = false;
            await kill();
            await start();
          }
        }
      }
      return { ...res, message: hooked() };
    };
    const client = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      retry: patient,
      interceptors: [interceptor, killAfterFirstMessage],
    });
    const window = await client.readToolOutput({
      runId: "window",
      handle,
      omitRendered: true,
      window: { case: "bytes", value: { offset: 0n } },
    });
    const data = window.frames.flatMap((f) =>
      f.frame.case === "content" && f.frame.value.body.case === "data"
        ? [f.frame.value.body.value]
        : [],
    );
    expect(sha256(Buffer.concat(data))).toBe(digest);
    expect(count.get("ReadToolOutput")).toBe(2);
  }, 60_000);

  it("offload repeats bytes whose replica died mid-upload, committing once", async () => {
    const { interceptor, count } = attemptCounter();
    // Killed with 8 MiB of the upload through nginx; back before the SDK sees the failure.
    const killMidUpload = cutFirstOffload(kill, start);
    const client = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      retry: patient,
      interceptors: [interceptor, killMidUpload],
    });
    const res = await client.offloadResult({ tenant, runId: "upload", callId: "up" }, payload);
    expect(res.attachment.sha256).toBe(digest);
    expect(count.get("Offload")).toBe(2);
    const records = [];
    for await (const att of client.listAll("upload")) records.push([att.handle, att.sha256]);
    expect(records).toEqual([[res.attachment.handle, digest]]);
  }, 60_000);

  it("stat retries nginx's 502 for a replica that is down", async () => {
    const handle = await stored("stat");
    await kill();
    const { interceptor, count } = attemptCounter();
    // The first attempt meets the dead replica; it is back before the retry.
    const restartAfterFirst: Interceptor = (next) => async (req) => {
      try {
        return await next(req);
      } finally {
        if (count.get("StatToolOutput") === 1) await start();
      }
    };
    const client = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      retry: patient,
      interceptors: [interceptor, restartAfterFirst],
    });
    const att = await client.stat("stat", handle);
    expect(att.sha256).toBe(digest);
    expect(count.get("StatToolOutput")).toBe(2);
  }, 60_000);

  it("never repeats forkRun, which is not idempotent", async () => {
    await stored("fork");
    await kill();
    const { interceptor, count } = attemptCounter();
    const client = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      retry: patient,
      interceptors: [interceptor],
    });
    const err = await client.forkRun("fork", "fork-child").then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Unavailable);
    expect(count.get("ForkRun")).toBe(1);
  }, 60_000);

  it("never repeats a streamed offload whose stream an attempt read", async () => {
    const { interceptor, count } = attemptCounter();
    const client = createSpillwayClient({
      baseUrl: nginx?.url ?? "",
      retry: patient,
      interceptors: [interceptor],
    });
    let pieces = 0;
    async function* stream() {
      for (let i = 0; i < payload.byteLength; i += 1 << 20) {
        pieces++;
        // The replica dies with 8 MiB of the upload through nginx.
        if (pieces === 9) await kill();
        yield payload.subarray(i, i + (1 << 20));
      }
    }
    const err = await client.offload({ tenant, runId: "stream", callId: "s" }, stream()).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err !== undefined && isTransientError(err)).toBe(true);
    expect(count.get("Offload")).toBe(1);
    expect(pieces).toBeLessThan(64);
  }, 60_000);
});
