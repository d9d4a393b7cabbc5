import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import {
  type CallOptions,
  type Client,
  ConnectError,
  createClient,
  type Transport,
} from "@connectrpc/connect";
import { createWritableIterable } from "@connectrpc/connect/protocol";
import {
  type ClientCompatRequest,
  type ClientResponseResult,
  ClientResponseResultSchema,
} from "./gen/connectrpc/conformance/v1/client_compat_pb.js";
import { StreamType } from "./gen/connectrpc/conformance/v1/config_pb.js";
import {
  BidiStreamRequestSchema,
  ClientStreamRequestSchema,
  type ConformancePayload,
  ConformancePayloadSchema,
  ConformanceService,
  IdempotentUnaryRequestSchema,
  ServerStreamRequestSchema,
  UnaryRequestSchema,
  UnimplementedRequestSchema,
} from "./gen/connectrpc/conformance/v1/service_pb.js";
import { appendProtoHeaders, delay, fromConnectError, toProtoHeaders } from "./wire-values.js";

type ConformanceClient = Client<typeof ConformanceService>;

/** When the test case cancels its call; -1 and undefined: never. */
interface CancelTiming {
  readonly beforeCloseSend: boolean;
  readonly afterCloseSendMs: number;
  readonly afterNumResponses: number;
}

function cancelTiming(req: ClientCompatRequest): CancelTiming {
  const timing = req.cancel?.cancelTiming;
  return {
    beforeCloseSend: timing?.case === "beforeCloseSend",
    afterCloseSendMs: timing?.case === "afterCloseSendMs" ? timing.value : -1,
    afterNumResponses: timing?.case === "afterNumResponses" ? timing.value : -1,
  };
}

function requestMessages<T extends DescMessage>(
  req: ClientCompatRequest,
  schema: T,
): MessageShape<T>[] {
  return req.requestMessages.map((any) => {
    const message = anyUnpack(any, schema);
    if (message === undefined) throw new Error(`request message is not a ${schema.typeName}`);
    return message;
  });
}

function singleRequest<T extends DescMessage>(
  req: ClientCompatRequest,
  schema: T,
): MessageShape<T> {
  const [message, ...rest] = requestMessages(req, schema);
  if (message === undefined || rest.length > 0) {
    throw new Error(`expected one request message, got ${req.requestMessages.length}`);
  }
  return message;
}

/**
 * A call about to be made: its result being recorded, the options that record its headers and
 * trailers and carry its signal, the controller that cancels it and when the case cancels it.
 */
function startCall(req: ClientCompatRequest) {
  const controller = new AbortController();
  const result = create(ClientResponseResultSchema);
  const headers = new Headers();
  appendProtoHeaders(headers, req.requestHeaders);
  const options: CallOptions = {
    headers,
    signal: controller.signal,
    ...(req.timeoutMs === undefined ? {} : { timeoutMs: req.timeoutMs }),
    onHeader: (h) => {
      result.responseHeaders = toProtoHeaders(h);
    },
    onTrailer: (t) => {
      result.responseTrailers = toProtoHeaders(t);
    },
  };
  return { controller, result, options, timing: cancelTiming(req) };
}

/** Runs a call's body and returns its result, with the error it ended with recorded. */
async function settle(
  result: ClientResponseResult,
  call: () => Promise<void>,
): Promise<ClientResponseResult> {
  try {
    await call();
  } catch (err) {
    recordError(result, err);
  }
  return result;
}

/** Records a failed call; its metadata stands for headers (if none came) and trailers. */
function recordError(result: ClientResponseResult, err: unknown): void {
  const connectErr = ConnectError.from(err);
  result.error = fromConnectError(connectErr);
  if (result.responseHeaders.length === 0)
    result.responseHeaders = toProtoHeaders(connectErr.metadata);
  result.responseTrailers = toProtoHeaders(connectErr.metadata);
}

const emptyPayload = create(ConformancePayloadSchema);

function payloadOf(message: { payload?: ConformancePayload | undefined }): ConformancePayload {
  return message.payload ?? emptyPayload;
}

async function unary(client: ConformanceClient, req: ClientCompatRequest, idempotent: boolean) {
  await delay(req.requestDelayMs);
  const { controller, result, options, timing } = startCall(req);
  if (timing.afterCloseSendMs >= 0)
    void delay(timing.afterCloseSendMs).then(() => controller.abort());
  return settle(result, async () => {
    const res = idempotent
      ? await client.idempotentUnary(singleRequest(req, IdempotentUnaryRequestSchema), options)
      : await client.unary(singleRequest(req, UnaryRequestSchema), options);
    result.payloads.push(payloadOf(res));
  });
}

async function serverStream(client: ConformanceClient, req: ClientCompatRequest) {
  await delay(req.requestDelayMs);
  const { controller, result, options, timing } = startCall(req);
  return settle(result, async () => {
    const responses = client.serverStream(singleRequest(req, ServerStreamRequestSchema), options);
    if (timing.afterCloseSendMs >= 0) {
      await delay(timing.afterCloseSendMs);
      controller.abort();
    }
    for await (const res of responses) {
      result.payloads.push(payloadOf(res));
      if (result.payloads.length === timing.afterNumResponses) controller.abort();
    }
  });
}

async function clientStream(client: ConformanceClient, req: ClientCompatRequest) {
  const { controller, result, options, timing } = startCall(req);
  const messages = requestMessages(req, ClientStreamRequestSchema);
  async function* requests() {
    for (const message of messages) {
      await delay(req.requestDelayMs);
      yield message;
    }
    if (timing.beforeCloseSend) controller.abort();
    else if (timing.afterCloseSendMs >= 0) {
      setTimeout(() => controller.abort(), timing.afterCloseSendMs);
    }
  }
  return settle(result, async () => {
    result.payloads.push(payloadOf(await client.clientStream(requests(), options)));
  });
}

async function bidiStream(client: ConformanceClient, req: ClientCompatRequest) {
  const { controller, result, options, timing } = startCall(req);
  const fullDuplex = req.streamType === StreamType.FULL_DUPLEX_BIDI_STREAM;
  const record = (payload: ConformancePayload) => {
    result.payloads.push(payload);
    if (result.payloads.length === timing.afterNumResponses) controller.abort();
  };
  return settle(result, async () => {
    const requests = createWritableIterable<MessageShape<typeof BidiStreamRequestSchema>>();
    const responses = client.bidiStream(requests, options)[Symbol.asyncIterator]();
    const messages = requestMessages(req, BidiStreamRequestSchema);
    for (const [i, message] of messages.entries()) {
      await delay(req.requestDelayMs);
      await requests.write(message);
      if (!fullDuplex) continue;
      if (timing.afterNumResponses === 0) controller.abort();
      const next = await responses.next();
      if (next.done === true) {
        result.numUnsentRequests = messages.length - i - 1;
        break;
      }
      record(payloadOf(next.value));
    }
    if (timing.beforeCloseSend) controller.abort();
    requests.close();
    if (timing.afterCloseSendMs >= 0) setTimeout(() => controller.abort(), timing.afterCloseSendMs);
    if (timing.afterNumResponses === 0) controller.abort();
    for (;;) {
      const next = await responses.next();
      if (next.done === true) break;
      record(payloadOf(next.value));
    }
  });
}

async function unimplemented(client: ConformanceClient, req: ClientCompatRequest) {
  const { result, options } = startCall(req);
  return settle(result, async () => {
    await client.unimplemented(singleRequest(req, UnimplementedRequestSchema), options);
  });
}

/**
 * invokeCompatRequest makes the call a ClientCompatRequest describes through `transport` and
 * returns what the client saw: headers, payloads, trailers and error, cancelling the call at
 * the moment the test case asks for. A request it cannot make throws.
 */
export function invokeCompatRequest(
  transport: Transport,
  req: ClientCompatRequest,
): Promise<ClientResponseResult> {
  const client = createClient(ConformanceService, transport);
  switch (req.method) {
    case ConformanceService.method.unary.name:
      return unary(client, req, false);
    case ConformanceService.method.idempotentUnary.name:
      return unary(client, req, true);
    case ConformanceService.method.serverStream.name:
      return serverStream(client, req);
    case ConformanceService.method.clientStream.name:
      return clientStream(client, req);
    case ConformanceService.method.bidiStream.name:
      return bidiStream(client, req);
    case ConformanceService.method.unimplemented.name:
      return unimplemented(client, req);
    default:
      throw new Error(`unknown method ${req.method}`);
  }
}
