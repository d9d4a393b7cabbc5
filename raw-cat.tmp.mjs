// Floor: a bare Node HTTP/2 client (no SDK, no gRPC parsing) copying the same window to stdout
// through the CLI's own fd writer.
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { createFdWriter } from "./cli/dist/fd-writer.js";

const W = 32 << 20;
const body = toBinary(
  ReadToolOutputRequestSchema,
  create(ReadToolOutputRequestSchema, {
    runId: "r1",
    handle: process.argv[2],
    omitRendered: true,
    window: { case: "bytes", value: {} },
  }),
);
const env = Buffer.alloc(5 + body.length);
env.writeUInt32BE(body.length, 1);
Buffer.from(body).copy(env, 5);
const out = createFdWriter(1, 4 << 20);
const client = http2.connect("http://127.0.0.1:50599", { settings: { initialWindowSize: W } });
client.on("connect", () => client.setLocalWindowSize(W));
const req = client.request({
  ":path": "/spillway.v1.SpillwayService/ReadToolOutput",
  ":method": "POST",
  "content-type": "application/grpc",
  te: "trailers",
});
req.end(env);
req.on("data", (c) => {
  if (!out.write(c)) {
    req.pause();
    out.once("drain", () => req.resume());
  }
});
req.on("end", () => {
  client.close();
  out.end();
});
