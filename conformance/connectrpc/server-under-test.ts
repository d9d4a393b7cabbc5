import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, createRegistry, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createConformanceService } from "./conformance-service.js";
import { HTTPVersion } from "./gen/connectrpc/conformance/v1/config_pb.js";
import {
  ServerCompatRequestSchema,
  ServerCompatResponseSchema,
} from "./gen/connectrpc/conformance/v1/server_compat_pb.js";
import { file_connectrpc_conformance_v1_service } from "./gen/connectrpc/conformance/v1/service_pb.js";
import { readSizeDelimited, sizeDelimited } from "./size-delimited.js";
import {
  createChunkPool,
  createPlaintextListener,
  createRequestDeadlines,
  createRequestIdleLimit,
  createSpillwayHandler,
  defaultLimits,
  serverHttp2Settings,
  wireDataFrame,
} from "./spillway.js";

/**
 * The server under test for `connectconformance --mode server`: reads one ServerCompatRequest
 * from stdin, serves ConformanceService on a free loopback port through Spillway's own HTTP/2
 * handler stack (createSpillwayHandler: the gRPC direct path in front of connect's own gRPC,
 * gRPC-Web and Connect handlers) with Spillway's HTTP/2 settings, message limit and
 * compression (none), and writes the ServerCompatResponse with the port to stdout. It serves
 * until SIGTERM. It serves HTTP/2 and HTTP/1.1: without TLS on Spillway's plaintext listener
 * (h2c or HTTP/1.1 by the connection's first bytes), with TLS by ALPN (and client certificates
 * when asked), as Spillway's own listeners do.
 */
async function main(): Promise<void> {
  let raw: Uint8Array | undefined;
  for await (const message of readSizeDelimited(process.stdin)) {
    raw = message;
    break;
  }
  if (raw === undefined) throw new Error("no ServerCompatRequest on stdin");
  const req = fromBinary(ServerCompatRequestSchema, raw);
  const version = req.httpVersion;
  if (version !== HTTPVersion.HTTP_VERSION_2 && version !== HTTPVersion.HTTP_VERSION_1) {
    throw new Error(`HTTP version ${HTTPVersion[version]} is not served`);
  }
  const creds = req.useTls ? req.serverCreds : undefined;
  if (req.useTls && creds === undefined)
    throw new Error("TLS asked for without server credentials");

  const limits = defaultLimits;
  const deadlines = createRequestDeadlines(undefined);
  const handlerOptions = {
    // The protocol-level interceptors Spillway's server runs; its application ones (auth,
    // tenant and in-flight limits, drain, logging, metrics) know only Spillway's methods.
    interceptors: [deadlines.interceptor, createRequestIdleLimit(limits.idleStreamMs)],
    acceptCompression: [],
    // The JSON codec must know the request types the service echoes back inside Anys.
    jsonOptions: { registry: createRegistry(file_connectrpc_conformance_v1_service) },
    readMaxBytes:
      req.messageReceiveLimit > 0 ? req.messageReceiveLimit : limits.maxChunkBytes + 64 * 1024,
  };
  const handler = createSpillwayHandler({
    handlerOptions,
    services: [createConformanceService()],
    wire: {
      framer: wireDataFrame,
      requestChunks: createChunkPool(1024 * 1024 + 16, 8, 64 * 1024),
    },
    idleStreamMs: limits.idleStreamMs,
    deadlines,
  });
  // The options startSpillwayServer gives its listeners.
  const server =
    creds === undefined
      ? http2.createServer({ settings: serverHttp2Settings }, handler)
      : http2.createSecureServer(
          {
            settings: serverHttp2Settings,
            cert: Buffer.from(creds.cert),
            key: Buffer.from(creds.key),
            allowHTTP1: true,
            ...(req.clientTlsCert.length === 0
              ? {}
              : {
                  ca: Buffer.from(req.clientTlsCert),
                  requestCert: true,
                  rejectUnauthorized: true,
                }),
          },
          handler,
        );
  const listener =
    creds === undefined
      ? createPlaintextListener({ http2Server: server, handler, idleMs: 0 }).listener
      : server;
  // The runner stops a server only once it is done with it.
  process.on("SIGTERM", () => process.exit(0));
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(0, "127.0.0.1", () => resolve());
  });
  const address = listener.address() as AddressInfo;
  const res = create(ServerCompatResponseSchema, {
    host: address.address,
    port: address.port,
    ...(creds === undefined ? {} : { pemCert: creds.cert }),
  });
  process.stdout.write(sizeDelimited(toBinary(ServerCompatResponseSchema, res)));
}

main().catch((err: unknown) => {
  process.stderr.write(`server-under-test: ${String(err)}\n`);
  process.exit(1);
});
