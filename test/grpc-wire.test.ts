import * as http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import {
  GetServerInfoRequestSchema,
  OffloadRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openGrpcStream } from "./support/raw-grpc.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** The status a raw gRPC call ends with: from the trailer, or a trailers-only header. */
interface RawAnswer {
  readonly status: number;
  readonly message: string;
  /** The response's content type, when the answer carried one. */
  readonly contentType?: string;
}

/** Sends `pieces` as one call's request body, each in its own write, and reads the status. */
function rawCall(
  url: string,
  method: string,
  pieces: readonly Uint8Array[],
  extraHeaders: http2.OutgoingHttpHeaders = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = openGrpcStream(session, method, extraHeaders);
    let status: string | undefined;
    let message = "";
    let contentType: string | undefined;
    stream.on("response", (h) => {
      contentType = h["content-type"];
    });
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
      if (h["grpc-message"] !== undefined) message = decodeURIComponent(String(h["grpc-message"]));
    };
    stream.on("response", take);
    stream.on("trailers", take);
    stream.on("data", () => {});
    stream.on("error", () => {});
    stream.on("close", () => {
      session.close();
      if (status === undefined) reject(new Error(`no grpc-status (rst ${stream.rstCode})`));
      else {
        resolve({
          status: Number(status),
          message,
          ...(contentType === undefined || status !== "0" ? {} : { contentType }),
        });
      }
    });
    for (const piece of pieces) stream.write(piece);
    stream.end();
  });
}

const envelope = (flags: number, body: Uint8Array) => Buffer.from(encodeEnvelope(flags, body));
const infoRequest = () =>
  envelope(0, toBinary(GetServerInfoRequestSchema, create(GetServerInfoRequestSchema, {})));

describe("the gRPC request body on the wire", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("reads a request however its bytes are split", async () => {
    const bytes = infoRequest();
    const oneByteWrites = [...bytes].map((b) => Uint8Array.of(b));
    expect(await rawCall(server.url, "GetServerInfo", oneByteWrites)).toMatchObject({
      status: 0,
      message: "",
    });
  });

  it("refuses a body that ends inside a message with INVALID_ARGUMENT", async () => {
    const answer = await rawCall(server.url, "GetServerInfo", [infoRequest().subarray(0, 3)]);
    expect(answer.status).toBe(Code.InvalidArgument);
    expect(answer.message).toMatch(/incomplete envelope/);
  });

  it("refuses a message over the server's limit from its header alone", async () => {
    const header = Buffer.alloc(5);
    header.writeUInt32BE(256 * 1024 * 1024, 1);
    const answer = await rawCall(server.url, "Offload", [header]);
    expect(answer.status).toBe(Code.ResourceExhausted);
  });

  it("refuses a compressed message that no encoding was declared for", async () => {
    const chunk = create(OffloadRequestSchema, {
      msg: { case: "chunk", value: new Uint8Array(3) },
    });
    const answer = await rawCall(server.url, "Offload", [
      envelope(1, toBinary(OffloadRequestSchema, chunk)),
    ]);
    // The gRPC protocol's code for it, which connectrpc's conformance suite checks.
    expect(answer.status).toBe(Code.Internal);
  });

  it("refuses a request encoding it does not accept", async () => {
    const answer = await rawCall(server.url, "GetServerInfo", [envelope(1, new Uint8Array(0))], {
      "grpc-encoding": "gzip",
    });
    expect(answer.status).toBe(Code.Unimplemented);
  });

  it("refuses a unary call without a request message, or with two, as a protocol error", async () => {
    const none = await rawCall(server.url, "GetServerInfo", []);
    expect(none.status).toBe(Code.Unimplemented);
    expect(none.message).toMatch(/missing input message/);
    const two = await rawCall(server.url, "GetServerInfo", [infoRequest(), infoRequest()]);
    expect(two.status).toBe(Code.Unimplemented);
    expect(two.message).toMatch(/extra input message/);
  });

  it("refuses a message that is not the method's protobuf", async () => {
    // Field 1 as a length-delimited value whose length runs past the message.
    const answer = await rawCall(server.url, "GetServerInfo", [
      envelope(0, Uint8Array.of(0x0a, 0x7f, 0x01)),
    ]);
    expect(answer.status).toBe(Code.InvalidArgument);
    expect(answer.message).toMatch(/^request: parse binary/);
    // A string field holding invalid UTF-8: the client's fault on every protocol, as over
    // Connect's JSON.
    const notUtf8 = await rawCall(server.url, "StatToolOutput", [
      envelope(0, Uint8Array.of(0x0a, 0x02, 0xc0, 0xaf)),
    ]);
    expect(notUtf8.status).toBe(Code.InvalidArgument);
    expect(notUtf8.message).toMatch(/utf-8/i);
  });

  it("refuses a malformed grpc-timeout with INVALID_ARGUMENT", async () => {
    const answer = await rawCall(server.url, "GetServerInfo", [infoRequest()], {
      "grpc-timeout": "soon",
    });
    expect(answer.status).toBe(Code.InvalidArgument);
    expect(answer.message).toMatch(/invalid grpc timeout/);
  });

  it("answers with the binary gRPC content type, for application/grpc and +proto alike", async () => {
    for (const contentType of ["application/grpc", "application/grpc+proto"]) {
      const answer = await rawCall(server.url, "GetServerInfo", [infoRequest()], {
        "content-type": contentType,
      });
      expect(answer).toEqual({ status: 0, message: "", contentType: "application/grpc+proto" });
    }
  });

  it("keeps serving after every refusal", async () => {
    expect((await server.sdk().serverInfo()).version).not.toBe("");
  });
});
