import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { type MetricsServer, startMetricsServer } from "../server/src/metrics-server.js";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const SERVICE = "spillway.v1.SpillwayService";

/** Sample is one line of the text exposition format. */
interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = l[2] as string;
    }
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return samples;
}

/** value returns the one sample named `name` whose labels include `labels`, or undefined. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}) {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} is ambiguous`);
  return found[0]?.value;
}

describe("Prometheus metrics of a real server", () => {
  let metrics: Metrics;
  let t: TestServer;
  let endpoint: MetricsServer;

  const scrape = async () => {
    const res = await fetch(endpoint.url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    return parseExposition(await res.text());
  };

  beforeAll(async () => {
    metrics = createMetrics();
    t = await startTestServer({ backend: "filesystem", metrics });
    endpoint = await startMetricsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry });
  });
  afterAll(async () => {
    await endpoint.close();
    await t.stop();
  });

  it("counts calls by procedure and code, bytes in and out, durations and in-flight streams", async () => {
    const sdk = t.sdk();
    const text = Array.from({ length: 20_000 }, (_, i) => `line ${i + 1} ünïcode\n`).join("");
    const binary = new Uint8Array(300_000).map((_, i) => (i * 7) % 256);
    const key = (callId: string) => ({ tenant: "dev", runId: "m", callId });
    await sdk.offload(key("text"), text);
    await sdk.offload(key("bin"), binary, { contentType: "application/octet-stream" });
    // Small payloads ride OffloadBatch calls; their bytes count the same.
    await Promise.all([sdk.offload(key("s1"), "small one\n"), sdk.offload(key("s2"), "two\n")]);
    const bytesIn = Buffer.byteLength(text) + binary.byteLength + 10 + 4;

    const lines = await sdk.readToolOutput({
      runId: "m",
      handle: "res_text",
      window: { case: "lines", value: { offset: 100n, limit: 50 } },
    });
    const bytes = await sdk.readToolOutput({
      runId: "m",
      handle: "res_bin",
      window: { case: "bytes", value: { offset: 1000n, limit: 200_000n } },
    });
    expect(await codeOf(sdk.readToolOutput({ runId: "m", handle: "res_forged" }))).toBe(
      Code.PermissionDenied,
    );
    const dataBytes = bytes.frames.reduce(
      (n, f) =>
        f.frame.case === "content" && f.frame.value.body.case === "data"
          ? n + f.frame.value.body.value.byteLength
          : n,
      0,
    );
    expect(dataBytes).toBe(200_000);
    const renderedBytes = Buffer.byteLength(lines.rendered) + Buffer.byteLength(bytes.rendered);
    expect(renderedBytes).toBeGreaterThan(0);

    const s = await scrape();
    const offload = { grpc_service: SERVICE, grpc_method: "Offload" };
    const read = { grpc_service: SERVICE, grpc_method: "ReadToolOutput" };
    const batch = { grpc_service: SERVICE, grpc_method: "OffloadBatch" };
    // go-grpc-prometheus' names, labels and Go code names.
    expect(value(s, "grpc_server_started_total", { ...offload, grpc_type: "client_stream" })).toBe(
      2,
    );
    expect(value(s, "grpc_server_started_total", { ...read, grpc_type: "server_stream" })).toBe(3);
    expect(value(s, "grpc_server_started_total", { ...batch, grpc_type: "unary" })).toBe(1);
    expect(value(s, "grpc_server_handled_total", { ...offload, grpc_code: "OK" })).toBe(2);
    expect(value(s, "grpc_server_handled_total", { ...read, grpc_code: "OK" })).toBe(2);
    expect(value(s, "grpc_server_handled_total", { ...read, grpc_code: "PermissionDenied" })).toBe(
      1,
    );
    expect(value(s, "grpc_server_handled_total", { ...batch, grpc_code: "OK" })).toBe(1);
    // A refused read is the client's doing: no server fault is counted.
    expect(value(s, "spillway_server_faults_total")).toBeUndefined();
    expect(value(s, "spillway_bytes_in_total")).toBe(bytesIn);
    expect(value(s, "spillway_batch_items_total", { grpc_code: "OK", fault: "none" })).toBe(2);
    expect(value(s, "spillway_bytes_out_total")).toBe(dataBytes + renderedBytes);
    // Messages: one OffloadBatch request and response; an Offload's header plus its chunks in,
    // one response out; a read's request in and its frames out.
    expect(value(s, "grpc_server_msg_received_total", batch)).toBe(1);
    expect(value(s, "grpc_server_msg_sent_total", batch)).toBe(1);
    expect(value(s, "grpc_server_msg_received_total", offload)).toBeGreaterThanOrEqual(4);
    expect(value(s, "grpc_server_msg_sent_total", offload)).toBe(2);
    expect(value(s, "grpc_server_msg_received_total", read)).toBe(3);
    // Each read sent at least a content frame and its trailer; the refused one sent none.
    expect(value(s, "grpc_server_msg_sent_total", read)).toBeGreaterThanOrEqual(4);
    expect(value(s, "grpc_server_handling_seconds_count", read)).toBe(3);
    expect(value(s, "grpc_server_handling_seconds_count", offload)).toBe(2);
    expect(value(s, "grpc_server_handling_seconds_bucket", { ...read, le: "+Inf" })).toBe(3);
    // Cumulative buckets: never decreasing, ending at the count.
    const buckets = ["0.001", "0.01", "0.1", "1", "10", "+Inf"].map(
      (le) => value(s, "grpc_server_handling_seconds_bucket", { ...read, le }) ?? -1,
    );
    expect(buckets[0]).toBeGreaterThanOrEqual(0);
    expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
    expect(value(s, "spillway_inflight_streams", read)).toBe(0);
    expect(value(s, "spillway_inflight_streams", offload)).toBe(0);
    expect(value(s, "spillway_process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(value(s, "spillway_backend_errors_total")).toBeUndefined();
  });

  it("counts MergeRun by code like every other call; a refused merge is no server fault", async () => {
    const sdk = t.sdk();
    const key = (runId: string, callId: string) => ({ tenant: "dev", runId, callId });
    await sdk.offload(key("merge-parent", "z"), "parent z\n");
    await sdk.forkRun("merge-parent", "merge-child");
    await sdk.offload(key("merge-child", "a"), "child a\n");
    await sdk.forkRun("merge-other", "merge-other-child");
    await sdk.offload(key("merge-other-child", "z"), "child z\n");
    await sdk.offload(key("merge-other", "z"), "other z\n");
    const faultsBefore = value(await scrape(), "spillway_server_faults_total") ?? 0;
    await sdk.mergeRun("merge-child", "merge-parent");
    expect(await codeOf(sdk.mergeRun("merge-other-child", "merge-other"))).toBe(Code.AlreadyExists);
    const s = await scrape();
    const merge = { grpc_service: SERVICE, grpc_method: "MergeRun" };
    expect(value(s, "grpc_server_started_total", { ...merge, grpc_type: "unary" })).toBe(2);
    expect(value(s, "grpc_server_handled_total", { ...merge, grpc_code: "OK" })).toBe(1);
    expect(value(s, "grpc_server_handled_total", { ...merge, grpc_code: "AlreadyExists" })).toBe(1);
    expect(value(s, "grpc_server_handling_seconds_count", merge)).toBe(2);
    expect(value(s, "spillway_server_faults_total") ?? 0).toBe(faultsBefore);
  });

  it("answers 404 for anything but GET /metrics", async () => {
    const base = new URL(endpoint.url);
    expect((await fetch(new URL("/", base))).status).toBe(404);
    expect((await fetch(new URL("/metrics/x", base))).status).toBe(404);
    expect((await fetch(endpoint.url, { method: "POST", body: "x" })).status).toBe(404);
    expect((await fetch(`${endpoint.url}?name[]=x`)).status).toBe(200);
  });

  it("counts backend failures by backend and code", async () => {
    // A file where the store's root directory should be: every filesystem call fails.
    const root = join(t.dataDir, "store");
    await rm(root, { recursive: true, force: true });
    await writeFile(root, "not a directory");

    const batchCalls = () =>
      scrape().then(
        (s) =>
          value(s, "grpc_server_handled_total", {
            grpc_service: SERVICE,
            grpc_method: "OffloadBatch",
            grpc_code: "OK",
          }) ?? 0,
      );
    const batchCallsBefore = await batchCalls();
    // A large payload streams on an Offload call, a small one rides an OffloadBatch.
    const large = t.sdk().offload({ tenant: "dev", runId: "m", callId: "c" }, "x".repeat(100_000));
    expect(await codeOf(large)).toBe(Code.FailedPrecondition);
    const small = t.sdk().offload({ tenant: "dev", runId: "m", callId: "d" }, "x\n");
    expect(await codeOf(small)).toBe(Code.FailedPrecondition);
    const s = await scrape();
    expect(
      value(s, "spillway_backend_errors_total", {
        backend: "filesystem",
        grpc_code: "FailedPrecondition",
      }),
    ).toBeGreaterThanOrEqual(2);
    const offload = { grpc_service: SERVICE, grpc_method: "Offload" };
    expect(
      value(s, "grpc_server_handled_total", { ...offload, grpc_code: "FailedPrecondition" }),
    ).toBe(1);
    // A broken store is the server's fault although its code is one clients also cause.
    expect(
      value(s, "spillway_server_faults_total", { ...offload, grpc_code: "FailedPrecondition" }),
    ).toBe(1);
    // The batch call itself succeeded; its one item failed, and that is counted by item.
    expect(await batchCalls()).toBe(batchCallsBefore + 1);
    expect(
      value(s, "spillway_batch_items_total", { grpc_code: "FailedPrecondition", fault: "server" }),
    ).toBe(1);
  });
});
