import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import {
  createServiceImplSpec,
  type HandlerContext,
  type ServiceImplSpec,
} from "@connectrpc/connect";
import {
  BidiStreamRequestSchema,
  ClientStreamRequestSchema,
  type ConformancePayload,
  type ConformancePayload_RequestInfo,
  ConformancePayload_RequestInfoSchema,
  ConformancePayloadSchema,
  ConformanceService,
  IdempotentUnaryRequestSchema,
  ServerStreamRequestSchema,
  type StreamResponseDefinition,
  UnaryRequestSchema,
  type UnaryResponseDefinition,
} from "./gen/connectrpc/conformance/v1/service_pb.js";
import { appendProtoHeaders, delay, toConnectError, toProtoHeaders } from "./wire-values.js";

/** What the server saw of a call: its headers, its deadline and the requests given. */
function requestInfo(ctx: HandlerContext, requests: Any[]): ConformancePayload_RequestInfo {
  const timeoutMs = ctx.timeoutMs();
  return create(ConformancePayload_RequestInfoSchema, {
    requestHeaders: toProtoHeaders(ctx.requestHeader),
    requests,
    // A grpc-timeout in micro- or nanoseconds leaves a fraction of a millisecond.
    ...(timeoutMs === undefined ? {} : { timeoutMs: BigInt(Math.floor(timeoutMs)) }),
  });
}

function packed<T extends DescMessage>(schema: T, message: MessageShape<T>): Any {
  return anyPack(schema, message);
}

/**
 * Answers a call with one response as `def` says: its headers and trailers, then either its
 * error (carrying what the server saw as a detail) or, after the delay asked for, the payload.
 */
async function unaryAnswer(
  def: UnaryResponseDefinition | undefined,
  requests: Any[],
  ctx: HandlerContext,
): Promise<{ payload: ConformancePayload }> {
  appendProtoHeaders(ctx.responseHeader, def?.responseHeaders ?? []);
  appendProtoHeaders(ctx.responseTrailer, def?.responseTrailers ?? []);
  const info = requestInfo(ctx, requests);
  if (def?.response.case === "error") {
    const err = def.response.value;
    throw toConnectError({
      ...err,
      details: [...err.details, packed(ConformancePayload_RequestInfoSchema, info)],
    });
  }
  await delay(def?.responseDelayMs ?? 0);
  return {
    payload: create(ConformancePayloadSchema, {
      requestInfo: info,
      ...(def?.response.case === "responseData" ? { data: def.response.value } : {}),
    }),
  };
}

/** The error that ends a stream: with the request info as a detail when nothing was sent. */
function streamError(
  def: StreamResponseDefinition,
  info: ConformancePayload_RequestInfo,
): Error | undefined {
  if (def.error === undefined) return undefined;
  const details =
    def.responseData.length === 0
      ? [...def.error.details, packed(ConformancePayload_RequestInfoSchema, info)]
      : def.error.details;
  return toConnectError({ ...def.error, details });
}

/**
 * createConformanceService implements connectrpc.conformance.v1.ConformanceService as the suite
 * specifies it: every method answers as the response definition in its request says, echoing
 * the request headers, the deadline and the requests it received. Unimplemented is left
 * unimplemented, so it answers UNIMPLEMENTED.
 */
export function createConformanceService(): ServiceImplSpec {
  return createServiceImplSpec<typeof ConformanceService>(ConformanceService, {
    unary: (req, ctx) =>
      unaryAnswer(req.responseDefinition, [packed(UnaryRequestSchema, req)], ctx),
    idempotentUnary: (req, ctx) =>
      unaryAnswer(req.responseDefinition, [packed(IdempotentUnaryRequestSchema, req)], ctx),
    async clientStream(reqs, ctx) {
      let def: UnaryResponseDefinition | undefined;
      const seen: Any[] = [];
      for await (const req of reqs) {
        def ??= req.responseDefinition;
        seen.push(packed(ClientStreamRequestSchema, req));
      }
      return unaryAnswer(def, seen, ctx);
    },
    async *serverStream(req, ctx) {
      const def = req.responseDefinition;
      appendProtoHeaders(ctx.responseHeader, def?.responseHeaders ?? []);
      appendProtoHeaders(ctx.responseTrailer, def?.responseTrailers ?? []);
      const info = requestInfo(ctx, [packed(ServerStreamRequestSchema, req)]);
      for (const [i, data] of (def?.responseData ?? []).entries()) {
        await delay(def?.responseDelayMs ?? 0);
        // Only the first response echoes the request.
        yield {
          payload: create(
            ConformancePayloadSchema,
            i === 0 ? { data, requestInfo: info } : { data },
          ),
        };
      }
      const err = def === undefined ? undefined : streamError(def, info);
      if (err !== undefined) throw err;
    },
    async *bidiStream(reqs, ctx) {
      let def: StreamResponseDefinition | undefined;
      let fullDuplex = false;
      let sent = 0;
      let unanswered: Any[] = [];
      for await (const req of reqs) {
        if (def === undefined) {
          def = req.responseDefinition;
          fullDuplex = req.fullDuplex;
          appendProtoHeaders(ctx.responseHeader, def?.responseHeaders ?? []);
          appendProtoHeaders(ctx.responseTrailer, def?.responseTrailers ?? []);
        }
        unanswered.push(packed(BidiStreamRequestSchema, req));
        if (!fullDuplex) continue;
        // Full duplex: one response per request, while responses are left.
        const data = def?.responseData[sent];
        if (data === undefined) break;
        await delay(def?.responseDelayMs ?? 0);
        yield {
          payload: create(ConformancePayloadSchema, {
            data,
            requestInfo: requestInfo(ctx, unanswered),
          }),
        };
        sent++;
        unanswered = [];
      }
      // Half duplex (nothing sent yet), or more responses asked for than requests came.
      const info = requestInfo(ctx, unanswered);
      const rest = def?.responseData.slice(sent) ?? [];
      for (const data of rest) {
        await delay(def?.responseDelayMs ?? 0);
        yield {
          payload: create(
            ConformancePayloadSchema,
            sent === 0 ? { data, requestInfo: info } : { data },
          ),
        };
        sent++;
      }
      const err = def === undefined ? undefined : streamError(def, info);
      if (err !== undefined) throw err;
    },
  });
}
