import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { OffloadRequestSchema, SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { startSpillwayServer } from "../server/src/server.js";
import { scratchDir } from "./support/scratch-dir.js";
import { spawnSpillway, spillwayCli } from "./support/spawn-spillway.js";

/** What the health poller process saw for one Check: the status, "refused" or an error. */
interface Seen {
  readonly conn: "kept" | "new";
  readonly seen: string;
}

/**
 * startHealthPoller runs test/support/health-poller.mjs against `url` in its own process and
 * collects what it sees; `until` resolves once an answer matches.
 */
function startHealthPoller(url: string) {
  const target = new URL(url).host;
  const script = fileURLToPath(new URL("./support/health-poller.mjs", import.meta.url));
  const child = spawn(process.execPath, [script, target, "50"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const seen: Seen[] = [];
  const waiting: { match: (s: Seen) => boolean; resolve: () => void }[] = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    const answer = JSON.parse(line) as Seen;
    seen.push(answer);
    for (const w of [...waiting]) {
      if (w.match(answer)) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve();
      }
    }
  });
  return {
    seen,
    until(match: (s: Seen) => boolean): Promise<void> {
      if (seen.some(match)) return Promise.resolve();
      return new Promise((resolve) => waiting.push({ match, resolve }));
    },
    stop() {
      child.kill("SIGKILL");
    },
  };
}

describe("graceful drain", () => {
  it("turns health NOT_SERVING, lets an in-flight offload finish, then stops", async () => {
    // The backend tells the test when the offload handler is running (past the drain gate).
    const base = createMemoryBackend();
    let handlerRunning: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      handlerRunning = resolve;
    });
    // Its first store call is the deleted-run check, a head.
    const backend = {
      ...base,
      head: (...args: Parameters<typeof base.head>) => {
        handlerRunning();
        return base.head(...args);
      },
    };
    const server = await startSpillwayServer({ backend, port: 0 });
    const transport = createGrpcTransport({ baseUrl: server.url });
    const health = createClient(Health, transport);
    const spillway = createClient(SpillwayService, transport);

    const statuses: ServingStatus[] = [];
    let watchStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      watchStarted = resolve;
    });
    const watching = (async () => {
      for await (const res of health.watch({ service: "" })) {
        statuses.push(res.status);
        watchStarted();
        if (res.status === ServingStatus.NOT_SERVING) return;
      }
    })();
    await started;

    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const inFlight = spillway.offload(
      (async function* () {
        yield create(OffloadRequestSchema, {
          msg: { case: "header", value: { key: { tenant: "dev", runId: "r", callId: "late" } } },
        });
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: randomBytes(64_000) } });
        await gate;
        yield create(OffloadRequestSchema, { msg: { case: "chunk", value: randomBytes(64_000) } });
      })(),
    );
    await running;
    const closing = server.close(10_000);
    await watching;
    release();
    const res = await inFlight;
    await closing;

    expect(statuses).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    expect(res.attachment?.sizeBytes).toBe(128_000n);
  });
});

describe("a drain whose grace runs out", () => {
  it("logs at error how many calls it cut off, which their own lines show as cancels", async () => {
    const lines: { level: number; msg: string; http2Streams?: number }[] = [];
    const logger = pino(
      { level: "info" },
      { write: (line: string) => lines.push(JSON.parse(line) as (typeof lines)[number]) },
    );
    const server = await startSpillwayServer({ backend: createMemoryBackend(), port: 0, logger });
    const spillway = createClient(SpillwayService, createGrpcTransport({ baseUrl: server.url }));
    let sent: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      sent = resolve;
    });
    // An offload whose client never sends its last chunk.
    const stuck = spillway
      .offload(
        (async function* () {
          yield create(OffloadRequestSchema, {
            msg: { case: "header", value: { key: { tenant: "dev", runId: "r", callId: "cut" } } },
          });
          sent();
          await new Promise(() => {});
        })(),
      )
      .catch((err: unknown) => err);
    await started;
    await new Promise((resolve) => setTimeout(resolve, 100));
    await server.close(200);
    expect(await stuck).toBeInstanceOf(Error);
    const cut = lines.filter((line) => line.msg.startsWith("the drain's grace ran out"));
    expect(cut).toEqual([
      expect.objectContaining({
        level: 50,
        msg: "the drain's grace ran out: calls still in flight were cut off",
        graceMs: 200,
        http2Streams: 1,
      }),
    ]);
  });

  it("logs nothing of the kind when every call finished within it", async () => {
    const lines: { msg: string }[] = [];
    const logger = pino(
      { level: "info" },
      { write: (line: string) => lines.push(JSON.parse(line)) },
    );
    const server = await startSpillwayServer({ backend: createMemoryBackend(), port: 0, logger });
    await createSpillwayClient({ baseUrl: server.url }).offload(
      { tenant: "dev", runId: "r", callId: "done" },
      "finished\n",
    );
    await server.close(200);
    expect(lines.filter((line) => line.msg.startsWith("the drain's grace"))).toEqual([]);
  });
});

describe("drain of a spillway serve process seen by a health poller in another process", () => {
  const dataDir = scratchDir("spillway-drain-");

  it("answers NOT_SERVING while still serving, then refuses connections, and finishes the in-flight offload", async () => {
    // The delay is set through the environment, which a server without the flag ignores.
    const env = { SPILLWAY_DRAIN_DELAY_MS: "5000", SPILLWAY_GRACE_MS: "20000" };
    const server = await spawnSpillway(["--data-dir", dataDir], env);
    const poller = startHealthPoller(server.url);
    try {
      await poller.until((s) => s.conn === "new" && s.seen === "SERVING");
      await poller.until((s) => s.conn === "kept" && s.seen === "SERVING");

      const key = (callId: string) => ({ tenant: "dev", runId: "drain", callId });
      const kept = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
      // The connection is up before the offload starts, so its stream opens before SIGTERM.
      await kept.raw.getServerInfo({});
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const inFlight = kept.raw.offload(
        (async function* () {
          yield create(OffloadRequestSchema, {
            msg: { case: "header", value: { key: key("in-flight") } },
          });
          yield create(OffloadRequestSchema, {
            msg: { case: "chunk", value: randomBytes(64_000) },
          });
          await gate;
          yield create(OffloadRequestSchema, {
            msg: { case: "chunk", value: randomBytes(64_000) },
          });
        })(),
      );
      // Awaited below; a failure before then must not surface as an unhandled rejection.
      inFlight.catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 200));

      server.kill("SIGTERM");
      await poller.until((s) => s.seen !== "SERVING");
      // The first answer that is not SERVING says the server drains; connections still work.
      expect(poller.seen.find((s) => s.seen !== "SERVING")?.seen).toBe("NOT_SERVING");
      // The load balancer has not moved traffic yet: a call on a new connection is served.
      const late = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
      expect((await late.offload(key("during-delay"), "still served\n")).handle).toBe(
        "res_during-delay",
      );
      await poller.until((s) => s.conn === "new" && s.seen === "refused");
      release();
      expect((await inFlight).attachment?.sizeBytes).toBe(128_000n);
      expect(await server.exited).toEqual({ code: 0, signal: null });

      const seen = poller.seen.map((s) => s.seen);
      const firstNotServing = seen.indexOf("NOT_SERVING");
      const firstRefused = seen.indexOf("refused");
      expect(firstNotServing).toBeGreaterThan(0);
      expect(firstRefused).toBeGreaterThan(firstNotServing);
      expect(seen.slice(0, firstNotServing).every((s) => s === "SERVING")).toBe(true);
      // Once draining, never SERVING again, and nothing but NOT_SERVING until connections go.
      expect(seen.slice(firstNotServing).includes("SERVING")).toBe(false);
      expect(poller.seen.some((s) => s.conn === "new" && s.seen === "NOT_SERVING")).toBe(true);
      const count = (what: string) => seen.filter((s) => s === what).length;
      console.log(
        `drain: poller saw ${count("SERVING")} SERVING, ${count("NOT_SERVING")} NOT_SERVING, then ${count("refused")} refused`,
      );
    } finally {
      poller.stop();
      server.kill();
    }

    // Both offloads committed: a new server on the same data reads them.
    const again = await spawnSpillway(["--data-dir", dataDir]);
    try {
      const client = createSpillwayClient({ baseUrl: again.url });
      expect((await client.stat("drain", "res_in-flight")).sizeBytes).toBe(128_000n);
      expect((await client.stat("drain", "res_during-delay")).sizeBytes).toBe(13n);
    } finally {
      await again.stop();
    }
  });

  it("keeps draining through a second SIGTERM, and a SIGINT cuts the delay short", async () => {
    // A supervisor or an operator that repeats SIGTERM must not turn the drain into a kill.
    const env = { SPILLWAY_DRAIN_DELAY_MS: "1500", SPILLWAY_GRACE_MS: "5000" };
    const twice = await spawnSpillway(["--data-dir", dataDir], env);
    try {
      twice.kill("SIGTERM");
      await new Promise((resolve) => setTimeout(resolve, 300));
      twice.kill("SIGTERM");
      // Still serving during the delay: the second SIGTERM did not end the process.
      const client = createSpillwayClient({ baseUrl: twice.url, retry: { maxAttempts: 1 } });
      expect((await client.raw.getServerInfo({})).version).not.toBe("");
      expect(await twice.exited).toEqual({ code: 0, signal: null });
    } finally {
      twice.kill();
    }

    // Ctrl-C after SIGTERM: the operator wants it gone now, not after a 10-minute delay (the
    // test's own timeout is far shorter than the delay).
    const long = { SPILLWAY_DRAIN_DELAY_MS: "600000", SPILLWAY_GRACE_MS: "5000" };
    const interrupted = await spawnSpillway(["--data-dir", dataDir], long);
    try {
      interrupted.kill("SIGTERM");
      await new Promise((resolve) => setTimeout(resolve, 300));
      interrupted.kill("SIGINT");
      expect(await interrupted.exited).toEqual({ code: 0, signal: null });
    } finally {
      interrupted.kill();
    }
  }, 30_000);

  it("exits on SIGTERM even when nothing reads its log any more", async () => {
    // A log shipper that died: the exit-time flush of buffered log lines retried EPIPE forever.
    const child = spawn(
      process.execPath,
      [spillwayCli, "serve", "--port", "0", "--data-dir", dataDir],
      {
        env: { ...process.env, SPILLWAY_DRAIN_DELAY_MS: "0" },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    try {
      await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
      child.stdout.destroy();
      child.kill("SIGTERM");
      const stuck = new Promise((resolve) => setTimeout(() => resolve("still running"), 10_000));
      expect(await Promise.race([exited, stuck])).toEqual({ code: 0, signal: null });
    } finally {
      child.kill("SIGKILL");
    }
  }, 30_000);
});
