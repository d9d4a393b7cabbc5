import { isMessage } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  OffloadBatchRequestSchema,
  OffloadBatchResponseSchema,
  OffloadRequestSchema,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { statusName } from "@spillway/wire";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { type IterableEnding, observeIterable } from "./observe-iterable.js";

/** REQUEST_DURATION_BUCKETS span 1 ms (a cached stat) to 60 s (a large streamed offload). */
export const REQUEST_DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** Metrics are Spillway's Prometheus collectors and the interceptor that feeds them. */
export interface Metrics {
  /** The registry every collector below (and the default process metrics) is registered in. */
  readonly registry: Registry;
  /** `spillway_requests_total{procedure,code}`: finished calls by gRPC status code. */
  readonly requests: Counter<"procedure" | "code">;
  /** `spillway_request_duration_seconds{procedure}`: call time until the last response message. */
  readonly duration: Histogram<"procedure">;
  /** `spillway_inflight_streams{procedure}`: calls whose response has not ended yet. */
  readonly inflight: Gauge<"procedure">;
  /** `spillway_bytes_in_total`: payload bytes received in Offload chunks and OffloadBatch items. */
  readonly bytesIn: Counter;
  /** `spillway_bytes_out_total`: bytes-mode data plus UTF-8 bytes of rendered window text. */
  readonly bytesOut: Counter;
  /** `spillway_batch_items_total{code}`: OffloadBatch items answered, by their own status code. */
  readonly batchItems: Counter<"code">;
  /** `spillway_backend_errors_total{backend,code}`: failed backend calls, fed by instrumentBackend. */
  readonly backendErrors: Counter<"backend" | "code">;
  /** `spillway_sweep_refused_total{code}`: entries a sweep could not read or remove, skipped. */
  readonly sweepRefused: Counter<"code">;
  /** `spillway_sweeps_skipped_total`: sweeps not started because the previous one still ran. */
  readonly sweepsSkipped: Counter;
  /** Records every call; put it first in the chain so refusals by later interceptors count. */
  readonly interceptor: Interceptor;
}

/**
 * createMetrics registers Spillway's collectors, and Node's default process metrics prefixed
 * `spillway_`, in `registry` (a fresh one by default; a registry that already holds them makes
 * this throw). Its interceptor counts every call exactly once, when the response ends — a
 * streamed response when its last message is sent, fails or is abandoned — and keeps
 * `spillway_inflight_streams` balanced on every path.
 */
export function createMetrics(registry: Registry = new Registry()): Metrics {
  collectDefaultMetrics({ register: registry, prefix: "spillway_" });
  const requests = new Counter({
    name: "spillway_requests_total",
    help: "Finished RPCs by procedure and gRPC status code.",
    labelNames: ["procedure", "code"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "spillway_request_duration_seconds",
    help: "RPC duration in seconds, until the last response message was sent.",
    labelNames: ["procedure"] as const,
    buckets: [...REQUEST_DURATION_BUCKETS],
    registers: [registry],
  });
  const inflight = new Gauge({
    name: "spillway_inflight_streams",
    help: "RPCs whose response has not ended yet.",
    labelNames: ["procedure"] as const,
    registers: [registry],
  });
  const bytesIn = new Counter({
    name: "spillway_bytes_in_total",
    help: "Payload bytes received in Offload chunks and OffloadBatch items.",
    registers: [registry],
  });
  const bytesOut = new Counter({
    name: "spillway_bytes_out_total",
    help: "Bytes-mode data bytes plus UTF-8 bytes of rendered window text sent by ReadToolOutput.",
    registers: [registry],
  });
  const batchItems = new Counter({
    name: "spillway_batch_items_total",
    help: "OffloadBatch items answered, by each item's own gRPC status code.",
    labelNames: ["code"] as const,
    registers: [registry],
  });
  const backendErrors = new Counter({
    name: "spillway_backend_errors_total",
    help: "Failed backend calls by backend kind and status code.",
    labelNames: ["backend", "code"] as const,
    registers: [registry],
  });

  const sweepRefused = new Counter({
    name: "spillway_sweep_refused_total",
    help: "Entries a sweep could not read or remove (a symlink, a corrupt record), skipped, by gRPC status code.",
    labelNames: ["code"] as const,
    registers: [registry],
  });
  const sweepsSkipped = new Counter({
    name: "spillway_sweeps_skipped_total",
    help: "Sweeps not started because the previous sweep was still running.",
    registers: [registry],
  });

  const countIn = (message: unknown) => {
    if (isMessage(message, OffloadRequestSchema) && message.msg.case === "chunk") {
      bytesIn.inc(message.msg.value.byteLength);
    } else if (isMessage(message, OffloadBatchRequestSchema)) {
      for (const item of message.items) bytesIn.inc(item.data.byteLength);
    }
  };
  const countOut = (message: unknown) => {
    if (isMessage(message, OffloadBatchResponseSchema)) {
      for (const { result } of message.results) {
        batchItems.inc({
          code: statusName(result.case === "error" ? result.value.code : undefined),
        });
      }
      return;
    }
    if (!isMessage(message, ReadToolOutputResponseSchema)) return;
    const frame = message.frame;
    if (frame.case === "content" && frame.value.body.case === "data") {
      bytesOut.inc(frame.value.body.value.byteLength);
    } else if (frame.case === "trailer") {
      bytesOut.inc(Buffer.byteLength(frame.value.rendered, "utf8"));
    }
  };

  const interceptor: Interceptor = (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const stopTimer = duration.startTimer({ procedure });
    inflight.inc({ procedure });
    let finished = false;
    const finish = (code: Code | undefined) => {
      if (finished) return;
      finished = true;
      inflight.dec({ procedure });
      stopTimer();
      requests.inc({ procedure, code: statusName(code) });
    };
    // A response stream the server stops reading early was cut short by the caller going away.
    const finishStream = (ending: IterableEnding) =>
      finish(
        ending.kind === "failed"
          ? ConnectError.from(ending.error).code
          : ending.kind === "abandoned"
            ? Code.Canceled
            : undefined,
      );
    try {
      let res: Awaited<ReturnType<typeof next>>;
      if (req.stream) {
        res = await next({
          ...req,
          message: observeIterable(req.message, { onItem: countIn }),
        });
      } else {
        countIn(req.message);
        res = await next(req);
      }
      if (!res.stream) {
        countOut(res.message);
        finish(undefined);
        return res;
      }
      return {
        ...res,
        message: observeIterable(res.message, { onItem: countOut, onEnd: finishStream }),
      };
    } catch (err) {
      finish(ConnectError.from(err).code);
      throw err;
    }
  };

  return {
    registry,
    requests,
    duration,
    inflight,
    bytesIn,
    bytesOut,
    batchItems,
    backendErrors,
    sweepRefused,
    sweepsSkipped,
    interceptor,
  };
}
