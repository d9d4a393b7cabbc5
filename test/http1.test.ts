import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { connect as netConnect } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import { Health } from "@spillway/proto/grpc/health/v1/health_pb.js";
import {
  file_spillway_v1_spillway,
  SpillwayService,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Backend } from "../server/src/backends/backend.js";
import { MAX_PIPELINED_REQUESTS } from "../server/src/http1-connections.js";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { codeOf } from "./support/code-of.js";
import { connectJsonRequest, rawExchange } from "./support/raw-http.js";
import { scratchDir } from "./support/scratch-dir.js";
import { spawnSpillway } from "./support/spawn-spillway.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const run = promisify(execFile);
const buf = join(import.meta.dirname, "../node_modules/.bin/buf");
const getServerInfo = "/spillway.v1.SpillwayService/GetServerInfo";

/** A transport of the given kind on HTTP/1.1 with a bearer token. */
function http1Transport(
  kind: "connect" | "grpc-web",
  baseUrl: string,
  token: string | undefined,
): Transport {
  const options = {
    baseUrl,
    httpVersion: "1.1" as const,
    interceptors: [
      ((next) => (req) => {
        if (token !== undefined) req.header.set("authorization", `Bearer ${token}`);
        return next(req);
      }) satisfies Interceptor,
    ],
  };
  return kind === "connect" ? createConnectTransport(options) : createGrpcWebTransport(options);
}

describe("HTTP/1.1 beside h2c on the plaintext port", () => {
  let t: TestServer;
  let metrics: Metrics;
  beforeAll(async () => {
    metrics = createMetrics();
    t = await startTestServer({
      backend: "memory",
      tokens: { "token-a": "tenant-a" },
      limits: { maxBlobBytes: 64 },
      metrics,
    });
  });
  afterAll(() => t.stop());

  it("answers plain curl's Connect JSON POST over HTTP/1.1", async () => {
    const { stdout } = await run("curl", [
      "-sS",
      "--fail-with-body",
      "-H",
      "content-type: application/json",
      "-H",
      "authorization: Bearer token-a",
      "-d",
      "{}",
      "-w",
      "\n%{http_version}",
      `${t.url}${getServerInfo}`,
    ]);
    const [body, version] = stdout.split("\n");
    expect(version).toBe("1.1");
    expect(JSON.parse(body ?? "")).toMatchObject({ backend: "memory", tenant: "tenant-a" });
  });

  it("answers buf curl without --http2-prior-knowledge", async () => {
    const schema = join(t.dataDir, "spillway.binpb");
    const files = [file_spillway_v1_spillway];
    for (let i = 0; i < files.length; i++) {
      for (const dep of files[i]?.dependencies ?? []) if (!files.includes(dep)) files.push(dep);
    }
    await writeFile(
      schema,
      toBinary(
        FileDescriptorSetSchema,
        create(FileDescriptorSetSchema, { file: files.reverse().map((f) => f.proto) }),
      ),
    );
    const { stdout } = await run(buf, [
      "curl",
      "--schema",
      schema,
      "--protocol",
      "connect",
      "-H",
      "authorization: Bearer token-a",
      "-d",
      "{}",
      `${t.url}${getServerInfo}`,
    ]);
    expect(JSON.parse(stdout)).toMatchObject({ backend: "memory", tenant: "tenant-a" });
  });

  for (const kind of ["connect", "grpc-web"] as const) {
    it(`serves connect-node's ${kind} transport on HTTP/1.1: offload, stream a window, stat`, async () => {
      const client = createClient(SpillwayService, http1Transport(kind, t.url, "token-a"));
      const key = { tenant: "tenant-a", runId: `h1-${kind}`, callId: "c" };
      const [record] = (
        await client.offloadBatch({
          items: [
            {
              header: { key, contentType: "text/plain" },
              data: new TextEncoder().encode("one\ntwo\n"),
            },
          ],
        })
      ).results;
      expect(record?.result.case).toBe("offloaded");
      const frames = [];
      for await (const frame of client.readToolOutput({
        runId: key.runId,
        handle: "res_c",
        window: { case: "lines", value: { offset: 1n, limit: 1 } },
      })) {
        frames.push(frame);
      }
      const trailer = frames.at(-1)?.frame;
      expect(trailer?.case).toBe("trailer");
      expect(trailer?.case === "trailer" ? trailer.value.rendered : "").toContain("two");
      const stat = await client.statToolOutput({ runId: key.runId, handle: "res_c" });
      expect(stat.attachment?.sizeBytes).toBe(8n);
    });
  }

  it("keeps serving gRPC clients over h2c on the same port", async () => {
    const info = await t.raw("token-a").getServerInfo({});
    expect(info.tenant).toBe("tenant-a");
    const health = createClient(Health, createGrpcTransport({ baseUrl: t.url }));
    expect((await health.check({ service: SpillwayService.typeName })).status).toBe(1);
  });

  it("tells HTTP/2 from HTTP/1.1 when the preface arrives one byte at a time", async () => {
    const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
    const emptySettings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const ex = await rawExchange(
      t.url,
      (s) => {
        let i = 0;
        const timer = setInterval(() => {
          if (i < preface.length) s.write(preface.subarray(i, ++i));
          else {
            clearInterval(timer);
            s.write(emptySettings);
          }
        }, 5);
      },
      1_500,
    );
    // The server's own SETTINGS frame: an HTTP/2 session, not an HTTP/1.1 error.
    expect(ex.text.charCodeAt(3)).toBe(4);
    expect(ex.text).not.toContain("HTTP/1.1");
  });

  it("refuses a bad token over HTTP/1.1 as over HTTP/2", async () => {
    for (const kind of ["connect", "grpc-web"] as const) {
      const client = createClient(SpillwayService, http1Transport(kind, t.url, "nope"));
      expect(await codeOf(client.getServerInfo({}))).toBe(Code.Unauthenticated);
    }
    const res = await fetch(`${t.url}${getServerInfo}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer nope" },
      body: "{}",
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: "unauthenticated" });
  });

  it("counts HTTP/1.1 calls in the metrics, by method and code", async () => {
    const count = async (code: string) =>
      (await metrics.registry.getSingleMetric("grpc_server_handled_total")?.get())?.values.find(
        (v) =>
          v.labels.grpc_service === "spillway.v1.SpillwayService" &&
          v.labels.grpc_method === "GetServerInfo" &&
          v.labels.grpc_code === code,
      )?.value ?? 0;
    const [ok, refused] = [await count("OK"), await count("Unauthenticated")];
    await createClient(SpillwayService, http1Transport("connect", t.url, "token-a")).getServerInfo(
      {},
    );
    await codeOf(
      createClient(SpillwayService, http1Transport("grpc-web", t.url, "bad")).getServerInfo({}),
    );
    expect(await count("OK")).toBe(ok + 1);
    expect(await count("Unauthenticated")).toBe(refused + 1);
  });

  it("enforces the server's limits over HTTP/1.1 (max-blob-bytes)", async () => {
    const client = createClient(SpillwayService, http1Transport("connect", t.url, "token-a"));
    const res = await client.offloadBatch({
      items: [
        {
          header: { key: { tenant: "tenant-a", runId: "big", callId: "c" } },
          data: new Uint8Array(65),
        },
      ],
    });
    const [result] = res.results;
    expect(result?.result.case).toBe("error");
    expect(result?.result.case === "error" ? result.result.value.code : 0).toBe(
      Code.ResourceExhausted,
    );
  });

  it("answers gRPC proper over HTTP/1.1 with a gRPC status in trailers", async () => {
    // gRPC needs HTTP/2; connect-node still answers the unary call over HTTP/1.1, status in
    // chunked trailers, as it does on the TLS port, so a proxy that downgrades gets a status.
    const envelope = join(t.dataDir, "empty.grpc");
    // One uncompressed, empty GetServerInfoRequest: flag 0, length 0.
    await writeFile(envelope, new Uint8Array(5));
    const { stdout } = await run("curl", [
      "-sS",
      "--http1.1",
      "--raw",
      "-i",
      "-H",
      "content-type: application/grpc",
      "-H",
      "te: trailers",
      "--data-binary",
      `@${envelope}`,
      `${t.url}${getServerInfo}`,
    ]);
    expect(stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(stdout).toMatch(/grpc-status: 16/i);
  });

  it("pipelines requests on one keep-alive connection, answered in order", async () => {
    const body = "{}";
    const auth = { authorization: "Bearer token-a" };
    const ex = await rawExchange(
      t.url,
      (s) =>
        s.write(
          connectJsonRequest(getServerInfo, body, auth) +
            connectJsonRequest("/spillway.v1.SpillwayService/StatToolOutput", '{"runId":"x"}', {
              ...auth,
              connection: "close",
            }),
        ),
      5_000,
    );
    expect(ex.closed).toBe(true);
    const statuses = [...ex.text.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1]);
    expect(statuses).toEqual(["200", "400"]);
    expect(ex.text).toContain('"tenant":"tenant-a"');
    expect(ex.text).toContain('"code":"invalid_argument"');
  });

  it("closes a connection that sends nothing, or one byte, within about 10 s", async () => {
    const [silent, oneByte] = await Promise.all([
      rawExchange(t.url, () => undefined, 20_000),
      rawExchange(t.url, (s) => s.write("P"), 20_000),
    ]);
    for (const ex of [silent, oneByte]) {
      expect(ex.closed).toBe(true);
      expect(ex.ms).toBeGreaterThan(9_000);
      expect(ex.ms).toBeLessThan(13_000);
    }
  }, 30_000);

  it("closes a connection whose headers trickle in (slowloris) within about 10 s", async () => {
    const ex = await rawExchange(
      t.url,
      (s) => {
        s.write("POST /spillway.v1.SpillwayService/GetServerInfo HTTP/1.1\r\nHost: localhost\r\n");
        const timer = setInterval(() => s.write("X-A: b\r\n"), 500);
        s.once("close", () => clearInterval(timer));
      },
      20_000,
    );
    expect(ex.closed).toBe(true);
    expect(ex.ms).toBeLessThan(13_000);
    expect(ex.text).toMatch(/^HTTP\/1\.1 408/);
  }, 30_000);

  it("refuses headers past 16 KiB with 431", async () => {
    const ex = await rawExchange(
      t.url,
      (s) => s.write(connectJsonRequest(getServerInfo, "{}", { "x-big": "a".repeat(20_000) })),
      5_000,
    );
    expect(ex.text).toMatch(/^HTTP\/1\.1 431/);
    expect(ex.closed).toBe(true);
  });
});

/**
 * A backend whose reads of the run "held" wait until the test lets them through, so a call on
 * that run stays in progress for as long as the test likes.
 */
function holdingReads() {
  let release: () => void = () => undefined;
  let gate: Promise<void> = Promise.resolve();
  let reached: () => void = () => undefined;
  let hit: Promise<void> = Promise.resolve();
  let aborted: () => void = () => undefined;
  let cancelled: Promise<void> = Promise.resolve();
  const wait = async (key: string, signal?: AbortSignal) => {
    if (!key.includes("held")) return;
    signal?.addEventListener("abort", () => aborted(), { once: true });
    reached();
    await gate;
  };
  return {
    wrap: (base: Backend): Backend => ({
      ...base,
      async get(key, opts) {
        await wait(key, opts?.signal);
        return base.get(key, opts);
      },
      async head(key, opts) {
        await wait(key, opts?.signal);
        return base.head(key, opts);
      },
      async list(prefix, opts) {
        await wait(prefix, opts?.signal);
        return base.list(prefix, opts);
      },
    }),
    /** Holds the next reads of the run "held"; resolves once one of them is waiting. */
    arm(): Promise<void> {
      gate = new Promise((r) => {
        release = r;
      });
      hit = new Promise((r) => {
        reached = r;
      });
      cancelled = new Promise((r) => {
        aborted = r;
      });
      return hit;
    },
    /** Resolves once the call of the held read (since the last arm) is cancelled. */
    cancelled: () => cancelled,
    release: () => release(),
  };
}

/** The count of `grpc_server_started_total` for one SpillwayService method. */
async function startedCount(metrics: Metrics, method: string): Promise<number> {
  const metric = metrics.registry.getSingleMetric("grpc_server_started_total");
  return (
    (await metric?.get())?.values.find(
      (v) =>
        v.labels.grpc_service === "spillway.v1.SpillwayService" && v.labels.grpc_method === method,
    )?.value ?? 0
  );
}

/** The HTTP statuses of every response in an exchange, in the order they came. */
const statusesOf = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1]);

describe("HTTP/1.1 pipelining: one request at a time per connection", () => {
  const auth = { authorization: "Bearer token-a" };
  const stat = (runId: string, handle: string, headers: Record<string, string> = {}) =>
    connectJsonRequest(
      "/spillway.v1.SpillwayService/StatToolOutput",
      JSON.stringify({ runId, handle }),
      { ...auth, ...headers },
    );
  const held = holdingReads();
  let t: TestServer;
  let metrics: Metrics;
  beforeAll(async () => {
    metrics = createMetrics();
    // One call at a time for the tenant: two requests of one connection in progress together
    // would have the second refused.
    t = await startTestServer({
      backend: "memory",
      tokens: { "token-a": "tenant-a" },
      maxCallsPerTenant: 1,
      metrics,
      wrapBackend: held.wrap,
    });
    const items = ["r", "held"].flatMap((runId) =>
      Array.from({ length: 20 }, (_, i) => ({
        header: { key: { tenant: "tenant-a", runId, callId: `c${i}` } },
        data: new TextEncoder().encode(`${i}\n`),
      })),
    );
    const res = await t.raw("token-a").offloadBatch({ items });
    expect(res.results.every((r) => r.result.case === "offloaded")).toBe(true);
  });
  // A test that fails while a call is held must not leave it holding the tenant's one slot.
  afterEach(() => held.release());
  afterAll(() => t.stop());

  it("answers more pipelined requests than the tenant's max_calls, every one and in order", async () => {
    const n = 20;
    const ex = await rawExchange(
      t.url,
      (s) =>
        s.write(
          Array.from({ length: n }, (_, i) =>
            stat("r", `res_c${i}`, i === n - 1 ? { connection: "close" } : {}),
          ).join(""),
        ),
      10_000,
    );
    expect(ex.closed).toBe(true);
    expect(statusesOf(ex.text)).toEqual(Array(n).fill("200"));
    const handles = [...ex.text.matchAll(/"handle":"(res_c\d+)"/g)].map((m) => m[1]);
    expect(handles).toEqual(Array.from({ length: n }, (_, i) => `res_c${i}`));
  });

  it("starts the next pipelined request only once the response before it has ended", async () => {
    const before = await startedCount(metrics, "GetServerInfo");
    const reached = held.arm();
    const ex = rawExchange(
      t.url,
      (s) =>
        s.write(
          stat("held", "res_c0") +
            connectJsonRequest(getServerInfo, "{}", auth) +
            connectJsonRequest(getServerInfo, "{}", { ...auth, connection: "close" }),
        ),
      10_000,
    );
    // Fails fast, not by timing out, when the first request never reaches the store.
    await Promise.race([reached, ex.then((e) => expect.fail(`ended first: ${e.text}`))]);
    // The calls behind the held one were parsed along with it; none of them may have started.
    await new Promise((r) => setTimeout(r, 200));
    expect(await startedCount(metrics, "GetServerInfo")).toBe(before);
    held.release();
    const { text, closed } = await ex;
    expect(closed).toBe(true);
    expect(statusesOf(text)).toEqual(["200", "200", "200"]);
    expect(text).toContain('"handle":"res_c0"');
    expect(await startedCount(metrics, "GetServerInfo")).toBe(before + 2);
  });

  it("serves MAX_PIPELINED_REQUESTS pipelined behind one in progress, closes one that sends more", async () => {
    const before = await startedCount(metrics, "GetServerInfo");
    const burst = (n: number) =>
      Array.from({ length: n }, (_, i) =>
        connectJsonRequest(
          getServerInfo,
          "{}",
          i === n - 1 ? { ...auth, connection: "close" } : auth,
        ),
      ).join("");
    const exchange = async (n: number) => {
      const reached = held.arm();
      const ex = rawExchange(t.url, (s) => s.write(stat("held", "res_c1") + burst(n)), 10_000);
      await Promise.race([reached, ex.then((e) => expect.fail(`ended first: ${e.text}`))]);
      held.release();
      return ex;
    };
    const served = await exchange(MAX_PIPELINED_REQUESTS);
    expect(statusesOf(served.text)).toEqual(Array(MAX_PIPELINED_REQUESTS + 1).fill("200"));
    expect(await startedCount(metrics, "GetServerInfo")).toBe(before + MAX_PIPELINED_REQUESTS);
    // One more waiting request closes the connection: none of them is served, and the call in
    // progress is cancelled with it.
    const refused = await exchange(MAX_PIPELINED_REQUESTS + 1);
    expect(refused.closed).toBe(true);
    expect(statusesOf(refused.text)).toEqual([]);
    expect(await startedCount(metrics, "GetServerInfo")).toBe(before + MAX_PIPELINED_REQUESTS);
  });

  it("answers a client that half-closed after sending its request", async () => {
    const batch = connectJsonRequest(
      "/spillway.v1.SpillwayService/OffloadBatch",
      JSON.stringify({
        items: [
          {
            header: { key: { tenant: "tenant-a", runId: "held-half", callId: "c" } },
            data: "eno=",
          },
        ],
      }),
      auth,
    );
    // The request sent, then the client's side shut, as `nc -N` and some proxies do; the
    // offload's first store call is held, so the FIN arrives while the call runs.
    const reached = held.arm();
    const ex = rawExchange(t.url, (s) => s.end(batch), 10_000);
    await Promise.race([reached, ex.then((e) => expect.fail(`ended first: ${e.text}`))]);
    await new Promise((r) => setTimeout(r, 100));
    held.release();
    const { text, closed } = await ex;
    expect(closed).toBe(true);
    expect(statusesOf(text)).toEqual(["200"]);
    expect(text).toContain('"handle":"res_c"');
  });

  it("cancels the call in progress when a client resets its connection while requests wait", async () => {
    const before = await startedCount(metrics, "GetServerInfo");
    const reached = held.arm();
    const cancelled = held.cancelled();
    const pipelined = connectJsonRequest(getServerInfo, "{}", auth).repeat(10);
    await rawExchange(
      t.url,
      (s) => {
        s.write(stat("held", "res_c1") + pipelined);
        // A reset, not a FIN: a client that only shut its side still reads its answers.
        void reached.then(() => s.resetAndDestroy());
      },
      2_000,
    );
    // A connection not read while requests wait never sees the client's FIN, and keeps what it
    // parsed for as long as the call in progress lasts (a Watch: for ever).
    await cancelled;
    held.release();
    expect(await startedCount(metrics, "GetServerInfo")).toBe(before);
  });
});

/**
 * Without a token file every caller is the tenant `dev`, and HTTP/1.1 is what a browser speaks:
 * a web page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) would be same-origin
 * with the server and could read and delete every output. Its requests carry the attacker's
 * name in `Host`, so a dev-mode server answers HTTP/1.1 only when `Host` names loopback.
 */
describe("HTTP/1.1 on a dev-mode server (no token file)", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory" });
  });
  afterAll(() => t.stop());

  const exchange = (host: string) =>
    rawExchange(
      t.url,
      (s) =>
        s.write(
          connectJsonRequest(getServerInfo, "{}", { connection: "close" }).replace(
            "Host: 127.0.0.1",
            `Host: ${host}`,
          ),
        ),
      5_000,
    );

  it("refuses a request whose Host is not a loopback name, with 403 and no data", async () => {
    const port = new URL(t.url).port;
    for (const host of [`rebound.example:${port}`, "rebound.example", `10.0.0.1:${port}`]) {
      const ex = await exchange(host);
      expect(ex.text, host).toMatch(/^HTTP\/1\.1 403 /);
      expect(ex.text).not.toContain('"tenant"');
      expect(ex.closed).toBe(true);
    }
  });

  it("answers a request addressed to 127.0.0.1, localhost or [::1], with or without a port", async () => {
    const port = new URL(t.url).port;
    for (const host of [
      `127.0.0.1:${port}`,
      "127.0.0.1",
      `localhost:${port}`,
      "LocalHost",
      `[::1]:${port}`,
      `app.localhost:${port}`,
    ]) {
      const ex = await exchange(host);
      expect(ex.text, host).toMatch(/^HTTP\/1\.1 200 /);
      expect(ex.text).toContain('"tenant":"dev"');
    }
    // curl as the docs show it, on the URL the server prints.
    const { stdout } = await run("curl", [
      "-sS",
      "-H",
      "content-type: application/json",
      "-d",
      "{}",
      `${t.url}${getServerInfo}`,
    ]);
    expect(JSON.parse(stdout)).toMatchObject({ tenant: "dev" });
  });
});

describe("HTTP/1.1 connections on close, age and idleness", () => {
  const exitDir = scratchDir("spillway-h1-exit-");

  it("closes an idle keep-alive connection on close() and exits promptly, health NOT_SERVING first", async () => {
    const t = await startTestServer({ backend: "memory" });
    const sockets = rawExchange(
      t.url,
      (s) => s.write(connectJsonRequest(getServerInfo, "{}")),
      30_000,
    );
    await new Promise((r) => setTimeout(r, 300));
    const health = createClient(Health, http1Transport("connect", t.url, undefined));
    const closing = t.server.close(20_000, 500);
    expect((await health.check({ service: SpillwayService.typeName })).status).toBe(2);
    const started = Date.now();
    await closing;
    expect(Date.now() - started).toBeLessThan(2_000);
    const ex = await sockets;
    expect(ex.closed).toBe(true);
    expect(ex.text).toMatch(/^HTTP\/1\.1 200/);
    await t.stop();
  });

  it("lets spillway serve exit at once on SIGTERM while an idle keep-alive connection is open", async () => {
    const server = await spawnSpillway(["--data-dir", join(exitDir, "data")]);
    const keptAlive = rawExchange(
      server.url,
      (s) => s.write(connectJsonRequest(getServerInfo, "{}")),
      20_000,
    );
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    server.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(3_000);
    const ex = await keptAlive;
    expect(ex.text).toMatch(/^HTTP\/1\.1 200/);
    expect(ex.closed).toBe(true);
  });

  it("closes a keep-alive connection after --max-connection-age-ms, and after --connection-idle-ms", async () => {
    for (const opts of [
      { maxConnectionAgeMs: 500, connectionIdleMs: 0 },
      { maxConnectionAgeMs: 0, connectionIdleMs: 500 },
    ]) {
      const t = await startTestServer({ backend: "memory", ...opts });
      const ex = await rawExchange(
        t.url,
        (s) => s.write(connectJsonRequest(getServerInfo, "{}")),
        5_000,
      );
      expect(ex.closed).toBe(true);
      // Node closes an idle keep-alive connection 1 s after the timeout it advertises.
      expect(ex.ms).toBeLessThan(opts.connectionIdleMs > 0 ? 2_500 : 1_500);
      expect(ex.text).toMatch(/^HTTP\/1\.1 200/);
      await t.stop();
    }
  });

  it("ends a call in progress when it reaches the age with Connection: close, not a cut", async () => {
    const t = await startTestServer({ backend: "memory", maxConnectionAgeMs: 300 });
    const client = createClient(SpillwayService, http1Transport("connect", t.url, undefined));
    await client.offloadBatch({
      items: [
        { header: { key: { tenant: "dev", runId: "r", callId: "c" } }, data: new Uint8Array(1) },
      ],
    });
    const ex = await rawExchange(
      t.url,
      (s) => {
        // The request's body arrives after the connection's age: the answer closes it.
        s.write(
          "POST /spillway.v1.SpillwayService/GetServerInfo HTTP/1.1\r\nHost: localhost\r\n" +
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{",
        );
        setTimeout(() => s.write("}"), 600);
      },
      5_000,
    );
    expect(ex.closed).toBe(true);
    expect(ex.text).toMatch(/^HTTP\/1\.1 200/);
    expect(ex.text).toMatch(/connection: close/i);
    expect(ex.text).toContain('"backend":"memory"');
    await t.stop();
  });

  it("on drain, ends the response in progress with Connection: close and serves no request pipelined behind it", async () => {
    const held = holdingReads();
    const metrics = createMetrics();
    const t = await startTestServer({ backend: "memory", metrics, wrapBackend: held.wrap });
    await t.raw().offloadBatch({
      items: [
        { header: { key: { tenant: "dev", runId: "held", callId: "c" } }, data: new Uint8Array(1) },
      ],
    });
    const reached = held.arm();
    let closing: Promise<void> | undefined;
    const ex = await rawExchange(
      t.url,
      (s) => {
        s.write(
          connectJsonRequest(
            "/spillway.v1.SpillwayService/StatToolOutput",
            '{"runId":"held","handle":"res_c"}',
          ) + connectJsonRequest(getServerInfo, "{}").repeat(3),
        );
        void reached.then(() => {
          closing = t.server.close(5_000);
          held.release();
        });
      },
      5_000,
    );
    expect(ex.closed).toBe(true);
    expect(statusesOf(ex.text)).toEqual(["200"]);
    expect(ex.text).toMatch(/connection: close/i);
    expect(ex.text).toContain('"handle":"res_c"');
    expect(await startedCount(metrics, "GetServerInfo")).toBe(0);
    await closing;
    await t.stop();
  });

  it("answers a call that arrives after the drain delay UNAVAILABLE, then closes its connection", async () => {
    const t = await startTestServer({ backend: "memory" });
    let closing: Promise<void> | undefined;
    const ex = await rawExchange(
      t.url,
      (s) => {
        s.write(
          "POST /spillway.v1.SpillwayService/GetServerInfo HTTP/1.1\r\nHost: localhost\r\n" +
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{",
        );
        setTimeout(() => {
          closing = t.server.close(5_000);
          setTimeout(() => s.write("}"), 100);
        }, 200);
      },
      5_000,
    );
    expect(ex.closed).toBe(true);
    expect(ex.text).toMatch(/^HTTP\/1\.1 503/);
    expect(ex.text).toMatch(/connection: close/i);
    expect(ex.text).toContain('"code":"unavailable"');
    await closing;
    await t.stop();
  });
});

describe("an HTTP/1.1 client that goes away mid-call", () => {
  let t: TestServer;
  let metrics: Metrics;
  beforeAll(async () => {
    metrics = createMetrics();
    t = await startTestServer({ backend: "memory", metrics });
  });
  afterAll(() => t.stop());

  /** handled calls of `method` by code, and the server faults among them. */
  const counts = async (method: string) => {
    const of = async (name: string) =>
      ((await metrics.registry.getSingleMetric(name)?.get())?.values ?? [])
        .filter((v) => v.labels.grpc_method === method)
        .map((v) => [String(v.labels.grpc_code), v.value] as const);
    return {
      handled: Object.fromEntries(await of("grpc_server_handled_total")),
      faults: (await of("spillway_server_faults_total")).reduce((sum, [, n]) => sum + n, 0),
    };
  };

  /** Writes `head` and `body` on a raw connection, reads until `enough` bytes came, then resets it. */
  const abandon = (head: string, body: Buffer, enough: number) =>
    new Promise<void>((resolve) => {
      const { hostname, port } = new URL(t.url);
      const socket = netConnect(
        { host: hostname.replace(/^\[|\]$/g, ""), port: Number(port) },
        () => {
          socket.write(head);
          socket.write(body);
          if (enough === 0) setTimeout(() => socket.resetAndDestroy(), 100);
        },
      );
      let got = 0;
      socket.on("data", (chunk: Buffer) => {
        got += chunk.length;
        if (got >= enough && enough > 0) socket.resetAndDestroy();
      });
      socket.on("error", () => undefined);
      socket.on("close", () => {
        resolve();
      });
    });

  it("counts a Connect read whose client reset the connection CANCELED, not a server fault", async () => {
    await createSpillwayClient({ baseUrl: t.url }).offload(
      { tenant: "dev", runId: "gone", callId: "big" },
      Buffer.alloc(8 << 20, 120),
    );
    const before = await counts("ReadToolOutput");
    const json = Buffer.from(
      JSON.stringify({ runId: "gone", handle: "res_big", bytes: { offset: "0" } }),
    );
    const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), json]);
    envelope.writeUInt32BE(json.length, 1);
    for (let i = 0; i < 5; i++) {
      await abandon(
        "POST /spillway.v1.SpillwayService/ReadToolOutput HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
          `Content-Type: application/connect+json\r\nContent-Length: ${envelope.length}\r\n\r\n`,
        envelope,
        200_000,
      );
    }
    // Every read ends, each its client's cancel: none stays in flight holding a call slot.
    await vi.waitUntil(
      async () =>
        ((await counts("ReadToolOutput")).handled.Canceled ?? 0) >=
        (before.handled.Canceled ?? 0) + 5,
      { timeout: 10_000, interval: 50 },
    );
    const after = await counts("ReadToolOutput");
    expect((after.handled.Canceled ?? 0) - (before.handled.Canceled ?? 0)).toBe(5);
    expect(after.faults).toBe(before.faults);
  });

  it("counts an upload its client reset mid-body CANCELED, not ABORTED", async () => {
    const before = await counts("Offload");
    const envelope = (json: string, announced?: number) => {
      const body = Buffer.from(json);
      const head = Buffer.alloc(5);
      head.writeUInt32BE(announced ?? body.length, 1);
      return Buffer.concat([head, body]);
    };
    for (let i = 0; i < 3; i++) {
      // The header, then a chunk message of which a tenth arrives.
      const sent = Buffer.concat([
        envelope(
          JSON.stringify({ header: { key: { tenant: "dev", runId: "up", callId: `c${i}` } } }),
        ),
        envelope(`{"chunk":"${"QUFB".repeat(250)}`, 10_000),
      ]);
      await abandon(
        "POST /spillway.v1.SpillwayService/Offload HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
          "Content-Type: application/connect+json\r\nContent-Length: 10000000\r\n\r\n",
        sent,
        0,
      );
    }
    await vi.waitUntil(
      async () =>
        Object.values((await counts("Offload")).handled).reduce((a, b) => a + b, 0) >=
        Object.values(before.handled).reduce((a, b) => a + b, 0) + 3,
      { timeout: 10_000, interval: 50 },
    );
    const after = await counts("Offload");
    expect(after.handled.Aborted ?? 0).toBe(before.handled.Aborted ?? 0);
    expect((after.handled.Canceled ?? 0) - (before.handled.Canceled ?? 0)).toBe(3);
  });
});
