import { createHash } from "node:crypto";
import { readdir, writeFile } from "node:fs/promises";
import http2 from "node:http2";
import net from "node:net";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import pino from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { FilesystemBackend } from "../server/src/backends/filesystem.js";
import { createMetrics, type Metrics } from "../server/src/metrics.js";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const SERVICE = "spillway.v1.SpillwayService";
const WARN = 40;
const ERROR = 50;
const wrongSha = "0".repeat(64);

/** One Offload call's request stream: the header, then the payload in one chunk. */
async function* offloadRequests(callId: string, data: string, expectedSha256?: string) {
  yield {
    msg: {
      case: "header" as const,
      value: {
        key: { tenant: "dev", runId: "faults", callId },
        ...(expectedSha256 === undefined ? {} : { expectedSha256 }),
      },
    },
  };
  yield { msg: { case: "chunk" as const, value: Buffer.from(data) } };
}

/** The value of the one sample of `name` whose labels include `labels`, or undefined. */
async function sample(metrics: Metrics, name: string, labels: Record<string, string>) {
  const metric = await metrics.registry.getSingleMetric(name)?.get();
  const found = metric?.values.filter((v) =>
    Object.entries(labels).every(([k, want]) => v.labels[k] === want),
  );
  return found?.reduce((n, v) => n + v.value, 0) || undefined;
}

describe("whose fault a failed call is, in its log level and the fault counters", () => {
  let t: TestServer;
  let metrics: Metrics;
  let lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    metrics = createMetrics();
    const logger = pino(
      { level: "debug" },
      { write: (line: string) => lines.push(JSON.parse(line)) },
    );
    t = await startTestServer({ backend: "filesystem", logger, metrics });
  });
  afterAll(() => t.stop());
  beforeEach(() => {
    lines = [];
  });
  const errors = () => lines.filter((l) => l.level === ERROR);

  it("logs a client's wrong expected_sha256 (DATA_LOSS) as a warning and counts no server fault", async () => {
    const call = t.raw().offload(offloadRequests("digest", "the bytes\n", wrongSha));
    expect(await codeOf(call)).toBe(Code.DataLoss);
    expect(errors()).toEqual([]);
    const refused = lines.filter((l) => l.procedure === "Offload" && l.code === "DataLoss");
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ level: WARN, msg: "call refused", fault: "client" });
    expect(refused[0]?.reason).toContain("does not match header.expected_sha256");

    const offload = { grpc_service: SERVICE, grpc_method: "Offload" };
    expect(
      await sample(metrics, "grpc_server_handled_total", { ...offload, grpc_code: "DataLoss" }),
    ).toBe(1);
    expect(await sample(metrics, "spillway_server_faults_total", {})).toBeUndefined();
  });

  it("logs a batch item's wrong digest as a refused item, counted as the client's", async () => {
    const data = Buffer.from("small\n");
    const res = await t.raw().offloadBatch({
      items: [
        {
          header: {
            key: { tenant: "dev", runId: "faults", callId: "good" },
            expectedSha256: createHash("sha256").update(data).digest("hex"),
          },
          data,
        },
        {
          header: {
            key: { tenant: "dev", runId: "faults", callId: "bad" },
            expectedSha256: wrongSha,
          },
          data,
        },
      ],
    });
    expect(res.results.map((r) => r.result.case)).toEqual(["offloaded", "error"]);
    expect(errors()).toEqual([]);
    expect(lines.find((l) => l.msg === "batch item refused")).toMatchObject({
      level: WARN,
      item: 1,
      code: "DataLoss",
      fault: "client",
    });
    expect(
      await sample(metrics, "spillway_batch_items_total", {
        grpc_code: "DataLoss",
        fault: "client",
      }),
    ).toBe(1);
    expect(
      await sample(metrics, "spillway_batch_items_total", { fault: "server" }),
    ).toBeUndefined();
  });

  it("logs other refusals below error: a bad argument and a forged handle warn, a taken key informs", async () => {
    const raw = t.raw();
    expect(await codeOf(raw.statToolOutput({ runId: "bad\nrun", handle: "res_x" }))).toBe(
      Code.InvalidArgument,
    );
    expect(await codeOf(raw.statToolOutput({ runId: "faults", handle: "res_forged" }))).toBe(
      Code.PermissionDenied,
    );
    await t
      .sdk()
      .offload({ tenant: "dev", runId: "faults", callId: "taken" }, "first\n".repeat(20_000));
    const again = raw.offload(offloadRequests("taken", "other bytes\n"));
    expect(await codeOf(again)).toBe(Code.AlreadyExists);
    expect(errors()).toEqual([]);
    const levelOf = (code: string) => lines.find((l) => l.code === code)?.level;
    expect(levelOf("InvalidArgument")).toBe(WARN);
    expect(levelOf("PermissionDenied")).toBe(WARN);
    expect(levelOf("AlreadyExists")).toBe(30);
    // Every code in Go's names, as the metrics' grpc_code label, success included.
    expect(lines.find((l) => l.procedure === "Offload" && l.code === "OK")?.level).toBe(20);
    expect(lines.filter((l) => l.code === "ok")).toEqual([]);
    expect(await sample(metrics, "spillway_server_faults_total", {})).toBeUndefined();
  });

  it("logs a corrupt stored record (DATA_LOSS) at error and counts it as a server fault", async () => {
    const sdk = t.sdk();
    const { handle } = await sdk.offload(
      { tenant: "dev", runId: "corrupt", callId: "c1" },
      "will be corrupted\n".repeat(10_000),
    );
    const registry = join((t.backend as FilesystemBackend).root, "t", "dev", "r", "corrupt", "h");
    for (const name of await readdir(registry)) {
      await writeFile(join(registry, name), "not a record");
    }
    expect(await codeOf(t.raw().statToolOutput({ runId: "corrupt", handle }))).toBe(Code.DataLoss);
    expect(errors()).toHaveLength(1);
    expect(errors()[0]).toMatchObject({
      msg: "call failed",
      procedure: "StatToolOutput",
      code: "DataLoss",
      fault: "server",
    });
    expect(
      await sample(metrics, "spillway_server_faults_total", {
        grpc_method: "StatToolOutput",
        grpc_code: "DataLoss",
      }),
    ).toBe(1);
  });

  it("logs a reader whose connection dropped mid-read as cancelled, no server fault", async () => {
    const { handle } = await t
      .sdk()
      .offload({ tenant: "dev", runId: "gone", callId: "big" }, Buffer.alloc(8 * 1024 ** 2, 97));
    const request = toBinary(
      ReadToolOutputRequestSchema,
      create(ReadToolOutputRequestSchema, {
        runId: "gone",
        handle,
        window: { case: "bytes", value: {} },
        omitRendered: true,
      }),
    );
    const frame = Buffer.alloc(5 + request.length);
    frame.writeUInt32BE(request.length, 1);
    frame.set(request, 5);
    const { hostname, port } = new URL(t.url);
    const socket = net.connect(Number(port), hostname);
    // A window of 0: the server may send its headers but no data, which waits on the reader.
    const session = http2.connect(t.url, {
      createConnection: () => socket,
      settings: { initialWindowSize: 0 },
    });
    const stream = session.request({
      ":method": "POST",
      ":path": `/${SERVICE}/ReadToolOutput`,
      "content-type": "application/grpc",
      te: "trailers",
    });
    stream.end(frame);
    await new Promise<void>((resolve) => stream.once("response", () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.resetAndDestroy();
    const ended = async () => {
      for (let i = 0; i < 100; i++) {
        const line = lines.find((l) => l.procedure === "ReadToolOutput");
        if (line !== undefined) return line;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return undefined;
    };
    expect(await ended()).toMatchObject({ code: "Canceled", level: 30 });
    expect(errors()).toEqual([]);
    expect(
      await sample(metrics, "spillway_server_faults_total", { grpc_method: "ReadToolOutput" }),
    ).toBeUndefined();
  });
});
