import { type DescMethod, isMessage } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  OffloadBatchRequestSchema,
  OffloadBatchResponseSchema,
  OffloadRequestSchema,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { endingOf, faultOf } from "./call-fault.js";
import { type BatchItemFailure, batchItemFailuresKey } from "./log-interceptor.js";
import { type IterableEnding, observeIterable } from "./observe-iterable.js";

/** REQUEST_DURATION_BUCKETS span 1 ms (a cached stat) to 60 s (a large streamed offload). */
export const REQUEST_DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/**
 * grpcCode is a status code as go-grpc-prometheus labels it (`grpc_code`): Go's names for the
 * codes, `OK` for success — `InvalidArgument`, `DataLoss`, `Unavailable`, ….
 */
export function grpcCode(code: Code | undefined): string {
  return code === undefined ? "OK" : Code[code];
}

/** The gRPC type of a method as go-grpc-prometheus labels it (`grpc_type`). */
const grpcTypes: Record<DescMethod["methodKind"], string> = {
  unary: "unary",
  client_streaming: "client_stream",
  server_streaming: "server_stream",
  bidi_streaming: "bidi_stream",
};

type MethodLabels = "grpc_type" | "grpc_service" | "grpc_method";

/**
 * Metrics are Spillway's Prometheus collectors and the interceptor that feeds them: the
 * grpc-ecosystem (go-grpc-prometheus) server metrics under their names and labels, so the
 * dashboards and alerts written for them work unchanged, plus Spillway's own.
 */
export interface Metrics {
  /** The registry every collector below (and the default process metrics) is registered in. */
  readonly registry: Registry;
  /** `grpc_server_started_total{grpc_type,grpc_service,grpc_method}`: calls started. */
  readonly started: Counter<MethodLabels>;
  /** `grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}`: calls finished. */
  readonly handled: Counter<MethodLabels | "grpc_code">;
  /** `grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}`: until the last response message. */
  readonly handling: Histogram<MethodLabels>;
  /** `grpc_server_msg_received_total{grpc_type,grpc_service,grpc_method}`: request messages read. */
  readonly received: Counter<MethodLabels>;
  /** `grpc_server_msg_sent_total{grpc_type,grpc_service,grpc_method}`: response messages sent. */
  readonly sent: Counter<MethodLabels>;
  /**
   * `spillway_server_faults_total{grpc_type,grpc_service,grpc_method,grpc_code}`: finished
   * calls that ended with a server fault (call-fault.ts), the numerator of the error-rate alert.
   */
  readonly serverFaults: Counter<MethodLabels | "grpc_code">;
  /**
   * `spillway_config_reloads_total{file,result}`: SIGHUP reloads of the token file
   * (`file="token_file"`) and the TLS files (`file="tls"`), `result="ok"` or `"failed"` (what
   * was in force stays in force), counted by each process that reloads.
   */
  readonly configReloads: Counter<"file" | "result">;
  /** `spillway_inflight_streams{grpc_service,grpc_method}`: calls whose response has not ended yet. */
  readonly inflight: Gauge<"grpc_service" | "grpc_method">;
  /** `spillway_bytes_in_total`: payload bytes received in Offload chunks and OffloadBatch items. */
  readonly bytesIn: Counter;
  /** `spillway_bytes_out_total`: bytes-mode data plus UTF-8 bytes of rendered window text. */
  readonly bytesOut: Counter;
  /**
   * `spillway_batch_items_total{grpc_code,fault}`: OffloadBatch items answered, by their own
   * status code and whose fault a failure was (`none`, `client`, `server`).
   */
  readonly batchItems: Counter<"grpc_code" | "fault">;
  /** `spillway_backend_errors_total{backend,grpc_code}`: failed backend calls, fed by instrumentBackend. */
  readonly backendErrors: Counter<"backend" | "grpc_code">;
  /** `spillway_sweep_refused_total{grpc_code}`: entries a sweep could not read or remove, skipped. */
  readonly sweepRefused: Counter<"grpc_code">;
  /** `spillway_sweeps_skipped_total`: sweeps asked for while another ran in this process. */
  readonly sweepsSkipped: Counter;
  /** Records every call; put it first in the chain so refusals by later interceptors count. */
  readonly interceptor: Interceptor;
}

/** Sets how the primary of several workers combines their values of the metric `name`. */
function setAggregator(registry: Registry, name: string, aggregator: "max" | "min"): void {
  const metric = registry.getSingleMetric(name) as { aggregator?: string } | undefined;
  if (metric !== undefined) metric.aggregator = aggregator;
}

/**
 * createMetrics registers Spillway's collectors, and Node's default process metrics prefixed
 * `spillway_`, in `registry` (a fresh one by default; a registry that already holds them makes
 * this throw). Its interceptor counts every call started when it arrives and handled exactly
 * once when the response ends — a streamed response when its last message is sent, fails or is
 * abandoned (CANCELED) — with every request message read and response message sent, and keeps
 * `spillway_inflight_streams` balanced on every path. Combined over several workers, open
 * file descriptors are the fullest worker's and their limit the lowest worker's.
 */
export function createMetrics(registry: Registry = new Registry()): Metrics {
  collectDefaultMetrics({ register: registry, prefix: "spillway_" });
  // Summed over the workers (prom-client's default), open and most descriptors gave the average
  // worker's ratio: one worker out of descriptors left the fleet's at 0.55. The fullest worker's
  // count over the lowest limit is what an alert on running out needs.
  setAggregator(registry, "spillway_process_open_fds", "max");
  setAggregator(registry, "spillway_process_max_fds", "min");
  const methodLabels = ["grpc_type", "grpc_service", "grpc_method"] as const;
  const started = new Counter({
    name: "grpc_server_started_total",
    help: "Total number of RPCs started on the server.",
    labelNames: methodLabels,
    registers: [registry],
  });
  const handled = new Counter({
    name: "grpc_server_handled_total",
    help: "Total number of RPCs completed on the server, regardless of success or failure.",
    labelNames: [...methodLabels, "grpc_code"] as const,
    registers: [registry],
  });
  const handling = new Histogram({
    name: "grpc_server_handling_seconds",
    help: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
    labelNames: methodLabels,
    buckets: [...REQUEST_DURATION_BUCKETS],
    registers: [registry],
  });
  const received = new Counter({
    name: "grpc_server_msg_received_total",
    help: "Total number of RPC stream messages received on the server.",
    labelNames: methodLabels,
    registers: [registry],
  });
  const sent = new Counter({
    name: "grpc_server_msg_sent_total",
    help: "Total number of gRPC stream messages sent by the server.",
    labelNames: methodLabels,
    registers: [registry],
  });
  const serverFaults = new Counter({
    name: "spillway_server_faults_total",
    help: "Finished RPCs that ended with a server fault (not the client's request), by gRPC status code.",
    labelNames: [...methodLabels, "grpc_code"] as const,
    registers: [registry],
  });
  const configReloads = new Counter({
    name: "spillway_config_reloads_total",
    help: "SIGHUP reloads of the token file and the TLS files, by file and result (ok or failed).",
    labelNames: ["file", "result"] as const,
    registers: [registry],
  });
  const inflight = new Gauge({
    name: "spillway_inflight_streams",
    help: "RPCs whose response has not ended yet.",
    labelNames: ["grpc_service", "grpc_method"] as const,
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
    help: "OffloadBatch items answered, by each item's own gRPC status code and whose fault a failure was.",
    labelNames: ["grpc_code", "fault"] as const,
    registers: [registry],
  });
  const backendErrors = new Counter({
    name: "spillway_backend_errors_total",
    help: "Failed backend calls by backend kind and gRPC status code.",
    labelNames: ["backend", "grpc_code"] as const,
    registers: [registry],
  });

  const sweepRefused = new Counter({
    name: "spillway_sweep_refused_total",
    help: "Entries a sweep could not read or remove (a symlink, a corrupt record), skipped, by gRPC status code.",
    labelNames: ["grpc_code"] as const,
    registers: [registry],
  });
  const sweepsSkipped = new Counter({
    name: "spillway_sweeps_skipped_total",
    help: "Sweeps asked for while another sweep was running in this process, not started.",
    registers: [registry],
  });

  const countIn = (message: unknown) => {
    if (isMessage(message, OffloadRequestSchema) && message.msg.case === "chunk") {
      bytesIn.inc(message.msg.value.byteLength);
    } else if (isMessage(message, OffloadBatchRequestSchema)) {
      for (const item of message.items) bytesIn.inc(item.data.byteLength);
    }
  };
  const countOut = (message: unknown, failures: readonly BatchItemFailure[] | undefined) => {
    if (isMessage(message, OffloadBatchResponseSchema)) {
      message.results.forEach(({ result }, index) => {
        if (result.case !== "error") {
          batchItems.inc({ grpc_code: "OK", fault: "none" });
          return;
        }
        const code = result.value.code as Code;
        // The item's own error says whose fault it was; the answered code alone cannot.
        const error = failures?.find((f) => f.index === index)?.error ?? new ConnectError("", code);
        batchItems.inc({ grpc_code: grpcCode(code), fault: faultOf(error) ?? "none" });
      });
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
    const labels = {
      grpc_type: grpcTypes[req.method.methodKind],
      grpc_service: req.service.typeName,
      grpc_method: req.method.name,
    };
    const place = { grpc_service: labels.grpc_service, grpc_method: labels.grpc_method };
    started.inc(labels);
    const stopTimer = handling.startTimer(labels);
    inflight.inc(place);
    let finished = false;
    const finish = (ending: unknown) => {
      if (finished) return;
      const err = endingOf(ending, req.signal);
      finished = true;
      inflight.dec(place);
      stopTimer();
      const code = grpcCode(err === undefined ? undefined : ConnectError.from(err).code);
      handled.inc({ ...labels, grpc_code: code });
      if (faultOf(err) === "server") serverFaults.inc({ ...labels, grpc_code: code });
    };
    const receivedOne = (message: unknown) => {
      received.inc(labels);
      countIn(message);
    };
    const sentOne = (message: unknown) => {
      sent.inc(labels);
      countOut(message, req.contextValues.get(batchItemFailuresKey));
    };
    // A response stream the server stops reading early was cut short by the caller going away.
    const finishStream = (ending: IterableEnding) =>
      finish(
        ending.kind === "failed"
          ? ending.error
          : ending.kind === "abandoned"
            ? new ConnectError("the caller went away", Code.Canceled)
            : undefined,
      );
    try {
      let res: Awaited<ReturnType<typeof next>>;
      if (req.stream) {
        res = await next({
          ...req,
          message: observeIterable(req.message, { onItem: receivedOne }),
        });
      } else {
        receivedOne(req.message);
        res = await next(req);
      }
      if (!res.stream) {
        sentOne(res.message);
        finish(undefined);
        return res;
      }
      return {
        ...res,
        message: observeIterable(res.message, { onItem: sentOne, onEnd: finishStream }),
      };
    } catch (err) {
      finish(err);
      throw err;
    }
  };

  return {
    registry,
    started,
    handled,
    handling,
    received,
    sent,
    serverFaults,
    configReloads,
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
