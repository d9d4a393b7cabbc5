import type * as http2 from "node:http2";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { OffloadRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";

/**
 * openGrpcStream starts a call of a SpillwayService method on a raw HTTP/2 session, with the
 * request headers a gRPC client sends (binary protobuf, trailers) and any extra ones, for tests
 * that write the body themselves: split envelopes, malformed frames, a request kept open.
 */
export function openGrpcStream(
  session: http2.ClientHttp2Session,
  method: string,
  extraHeaders: http2.OutgoingHttpHeaders = {},
): http2.ClientHttp2Stream {
  return session.request({
    ":method": "POST",
    ":path": `/spillway.v1.SpillwayService/${method}`,
    "content-type": "application/grpc",
    te: "trailers",
    ...extraHeaders,
  });
}

/** OffloadRequestInit is an OffloadRequest as `create` takes it. */
export type OffloadRequestInit = MessageInitShape<typeof OffloadRequestSchema>;

/** offloadEnvelope is one OffloadRequest as it goes on the wire: the envelope, uncompressed. */
export function offloadEnvelope(message: OffloadRequestInit): Buffer {
  return Buffer.from(
    encodeEnvelope(0, toBinary(OffloadRequestSchema, create(OffloadRequestSchema, message))),
  );
}
