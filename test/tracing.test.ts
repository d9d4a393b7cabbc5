import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Client, Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { context, propagation, trace } from "@opentelemetry/api";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { createSpillwayClient } from "@spillway/client";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { listenLoopback } from "./support/listen-loopback.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";
import { waitFor } from "./support/wait-for.js";

/** The example preload operators are told to use (docs/operations.md, "Tracing"). */
const preload = fileURLToPath(new URL("../docs/tracing/otel-preload.mjs", import.meta.url));

/** One span as OTLP/HTTP JSON carries it, with its resource's attributes. */
interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly traceState?: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: { key: string; value: Record<string, unknown> }[];
  readonly status?: { code?: number; message?: string };
  readonly resource: Record<string, unknown>;
}

/** An OTLP attribute value as a plain value (intValue may be a string in JSON). */
function plain(value: Record<string, unknown>): unknown {
  if ("intValue" in value) return Number(value.intValue);
  return Object.values(value)[0];
}

function attributesOf(span: OtlpSpan): Record<string, unknown> {
  return Object.fromEntries(span.attributes.map((a) => [a.key, plain(a.value)]));
}

/** A local OTLP/HTTP trace receiver: every span posted to /v1/traces, in arrival order. */
async function startOtlpReceiver(): Promise<{ url: string; spans: OtlpSpan[]; server: Server }> {
  const spans: OtlpSpan[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      const parsed = JSON.parse(body) as {
        resourceSpans: {
          resource: { attributes: { key: string; value: Record<string, unknown> }[] };
          scopeSpans: { spans: Omit<OtlpSpan, "resource">[] }[];
        }[];
      };
      for (const rs of parsed.resourceSpans) {
        const resource = Object.fromEntries(
          rs.resource.attributes.map((a) => [a.key, plain(a.value)]),
        );
        for (const ss of rs.scopeSpans) {
          for (const span of ss.spans) spans.push({ ...span, resource });
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  return { url: `${await listenLoopback(server)}/v1/traces`, spans, server };
}

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

describe("OpenTelemetry server spans from `spillway serve` with the documented SDK preload", () => {
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let serve: SpillwayProcess;
  let dataDir: string;
  let client: Client<typeof SpillwayService>;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    dataDir = await mkdtemp(join(tmpdir(), "spillway-tracing-"));
    serve = await spawnSpillway(["--data-dir", dataDir], {
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${preload}`.trim(),
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_SERVICE_NAME: "spillway-under-test",
    });
    client = createClient(SpillwayService, createGrpcTransport({ baseUrl: serve.url }));
  });
  afterAll(async () => {
    await serve?.stop();
    receiver?.server.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A call's headers continuing a fresh remote trace, and the ids it names. */
  const remoteParent = () => {
    const traceId = hex(16);
    const parentSpanId = hex(8);
    const headers = {
      traceparent: `00-${traceId}-${parentSpanId}-01`,
      tracestate: "spillwaytest=42",
    };
    return { traceId, parentSpanId, headers };
  };
  /** The one span of traceId the server exported, once it has (within 10 s). */
  const spanOf = async (traceId: string): Promise<OtlpSpan> => {
    const ofTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    await waitFor(async () => ofTrace().length > 0, 10_000);
    expect(ofTrace()).toHaveLength(1);
    return ofTrace()[0] as OtlpSpan;
  };

  it("continues the caller's trace in a server span with the RPC attributes, status unset on success", async () => {
    const { traceId, parentSpanId, headers } = remoteParent();
    const res = await client.offloadBatch(
      {
        items: [
          {
            header: { key: { tenant: "dev", runId: "traced", callId: "c1" } },
            data: Buffer.from("traced\n"),
          },
        ],
      },
      { headers },
    );
    expect(res.results[0]?.result.case).toBe("offloaded");
    const span = await spanOf(traceId);
    expect(span).toMatchObject({
      traceId,
      parentSpanId,
      traceState: "spillwaytest=42",
      name: "spillway.v1.SpillwayService/OffloadBatch",
      kind: 2, // SERVER
    });
    expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(span.spanId).not.toBe(parentSpanId);
    expect(attributesOf(span)).toEqual({
      "rpc.system": "grpc",
      "rpc.service": "spillway.v1.SpillwayService",
      "rpc.method": "OffloadBatch",
      "rpc.grpc.status_code": 0,
    });
    expect(span.status?.code ?? 0).toBe(0); // UNSET
    expect(span.resource["service.name"]).toBe("spillway-under-test");
  });

  it("leaves the status unset for a client's wrong expected_sha256 (DATA_LOSS)", async () => {
    const { traceId, headers } = remoteParent();
    async function* requests() {
      yield {
        msg: {
          case: "header" as const,
          value: {
            key: { tenant: "dev", runId: "traced", callId: "digest" },
            expectedSha256: "0".repeat(64),
          },
        },
      };
      yield { msg: { case: "chunk" as const, value: Buffer.from("bytes\n") } };
    }
    expect(await codeOf(client.offload(requests(), { headers }))).toBe(Code.DataLoss);
    const span = await spanOf(traceId);
    expect(span.name).toBe("spillway.v1.SpillwayService/Offload");
    expect(attributesOf(span)).toMatchObject({
      "rpc.grpc.status_code": Code.DataLoss,
      "spillway.fault": "client",
    });
    expect(span.status?.code ?? 0).toBe(0);
  });

  it("marks a server fault (a corrupt stored record, DATA_LOSS) with status ERROR", async () => {
    const offloaded = await client.offloadBatch({
      items: [
        {
          header: { key: { tenant: "dev", runId: "broken", callId: "c1" } },
          data: Buffer.from("to be corrupted\n"),
        },
      ],
    });
    const result = offloaded.results[0]?.result;
    if (result?.case !== "offloaded") throw new Error("the offload failed");
    const handle = result.value.attachment?.handle ?? "";
    const registry = join(dataDir, "t", "dev", "r", "broken", "h");
    for (const name of await readdir(registry)) {
      await writeFile(join(registry, name), "not a record");
    }
    const { traceId, parentSpanId, headers } = remoteParent();
    expect(await codeOf(client.statToolOutput({ runId: "broken", handle }, { headers }))).toBe(
      Code.DataLoss,
    );
    const span = await spanOf(traceId);
    expect(span).toMatchObject({
      parentSpanId,
      name: "spillway.v1.SpillwayService/StatToolOutput",
    });
    expect(attributesOf(span)).toMatchObject({
      "rpc.method": "StatToolOutput",
      "rpc.grpc.status_code": Code.DataLoss,
      "spillway.fault": "server",
    });
    expect(span.status?.code).toBe(2); // ERROR
    expect(span.status?.message).toContain("corrupt");
  });

  it("joins the trace of the TypeScript client's active span (the client injects traceparent)", async () => {
    // An application with its own SDK: the client finds @opentelemetry/api and propagates.
    const provider = new NodeTracerProvider();
    provider.register();
    try {
      const sdk = createSpillwayClient({ baseUrl: serve.url });
      const tracer = trace.getTracer("agent-runtime");
      const { traceId, spanId } = await tracer.startActiveSpan("tool call", async (span) => {
        // Large enough to stream on its own Offload call.
        await sdk.offload(
          { tenant: "dev", runId: "traced", callId: "from-sdk" },
          "from the agent\n".repeat(10_000),
        );
        span.end();
        return span.spanContext();
      });
      const span = await spanOf(traceId);
      expect(span).toMatchObject({
        parentSpanId: spanId,
        name: "spillway.v1.SpillwayService/Offload",
      });
      expect(attributesOf(span)["rpc.grpc.status_code"]).toBe(0);
    } finally {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    }
  });
});
