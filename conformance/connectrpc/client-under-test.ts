import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { invokeCompatRequest } from "./call-under-test.js";
import {
  type ClientCompatRequest,
  ClientCompatRequestSchema,
  type ClientCompatResponse,
  ClientCompatResponseSchema,
  ClientErrorResultSchema,
} from "./gen/connectrpc/conformance/v1/client_compat_pb.js";
import {
  Codec,
  Compression,
  HTTPVersion,
  Protocol,
} from "./gen/connectrpc/conformance/v1/config_pb.js";
import { readSizeDelimited, sizeDelimited } from "./size-delimited.js";
import {
  type ClientTlsOptions,
  createGrpcTransport,
  createGrpcWebTransport,
  createKeepAliveAgent,
  createWideWindowSessionManager,
} from "./spillway.js";

/** connect's default message limit, for test cases that set none. */
const unlimitedBytes = 0xffffffff;
/** Test cases run at once: enough to overlap their delays, few enough for a 2-core machine. */
const concurrency = 8;

/**
 * A test case's own connection and the SDK transport over it: gRPC-Web on a keep-alive agent,
 * or gRPC on a session manager; `close` ends it once the case's call has answered.
 */
function connect(
  grpcWeb: boolean,
  baseUrl: string,
  tls: ClientTlsOptions,
  readMaxBytes: number,
): { transport: Transport; close(): void } {
  if (grpcWeb) {
    const agent = createKeepAliveAgent(baseUrl, tls);
    return {
      transport: createGrpcWebTransport({ baseUrl, agent, readMaxBytes }),
      close: () => agent.destroy(),
    };
  }
  const sessionManager = createWideWindowSessionManager(baseUrl, tls);
  return {
    transport: createGrpcTransport({ baseUrl, sessionManager, readMaxBytes }),
    close: () => sessionManager.abort(),
  };
}

/**
 * Makes one test case's call over its own connection with the SDK's transport for its
 * protocol: gRPC over HTTP/2, or gRPC-Web over HTTP/1.1.
 */
async function run(req: ClientCompatRequest): Promise<ClientCompatResponse> {
  const res = create(ClientCompatResponseSchema, { testName: req.testName });
  try {
    const grpc = req.httpVersion === HTTPVersion.HTTP_VERSION_2 && req.protocol === Protocol.GRPC;
    const grpcWeb =
      req.httpVersion === HTTPVersion.HTTP_VERSION_1 && req.protocol === Protocol.GRPC_WEB;
    if (!grpc && !grpcWeb) throw new Error("only gRPC over HTTP/2 and gRPC-Web over HTTP/1.1");
    if (req.codec !== Codec.PROTO) throw new Error("only the proto codec is spoken");
    if (req.compression !== Compression.IDENTITY && req.compression !== Compression.UNSPECIFIED) {
      throw new Error("no compression is spoken");
    }
    const tls = req.serverTlsCert.length > 0;
    const baseUrl = `${tls ? "https" : "http"}://${req.host}:${req.port}`;
    const creds = req.clientTlsCreds;
    const tlsOptions = tls
      ? {
          ca: Buffer.from(req.serverTlsCert),
          ...(creds === undefined
            ? {}
            : { cert: Buffer.from(creds.cert), key: Buffer.from(creds.key) }),
        }
      : {};
    const readMaxBytes = req.messageReceiveLimit > 0 ? req.messageReceiveLimit : unlimitedBytes;
    const { transport, close } = connect(grpcWeb, baseUrl, tlsOptions, readMaxBytes);
    try {
      res.result = { case: "response", value: await invokeCompatRequest(transport, req) };
    } finally {
      close();
    }
  } catch (err) {
    res.result = {
      case: "error",
      value: create(ClientErrorResultSchema, { message: String(err) }),
    };
  }
  return res;
}

/**
 * The client under test for `connectconformance --mode client`: reads ClientCompatRequests from
 * stdin, makes each call with the Spillway SDK's transport for its protocol (createGrpcTransport
 * over createWideWindowSessionManager, or createGrpcWebTransport over createKeepAliveAgent, with
 * its TLS options when the case uses TLS), a few at a time, and writes each ClientCompatResponse to
 * stdout as its call ends. Exits once stdin ends and every call has answered, or on SIGTERM.
 */
async function main(): Promise<void> {
  process.on("SIGTERM", () => process.exit(0));
  const running = new Set<Promise<void>>();
  for await (const raw of readSizeDelimited(process.stdin)) {
    const req = fromBinary(ClientCompatRequestSchema, raw);
    const call: Promise<void> = run(req).then((res) => {
      process.stdout.write(sizeDelimited(toBinary(ClientCompatResponseSchema, res)));
      running.delete(call);
    });
    running.add(call);
    if (running.size >= concurrency) await Promise.race(running);
  }
  await Promise.all(running);
}

main().catch((err: unknown) => {
  process.stderr.write(`client-under-test: ${String(err)}\n`);
  process.exit(1);
});
