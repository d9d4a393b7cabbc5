import {
  create,
  type DescMessage,
  fromBinary,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  ListToolOutputsRequestSchema,
  ListToolOutputsResponseSchema,
  OffloadBatchRequestSchema,
  OffloadBatchResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** The receive limit grpc-js, grpcio and grpc-go clients have unless told otherwise. */
const defaultReceiveLimit = 4 * 1024 * 1024;

type Unary<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
) => Promise<{ response: MessageShape<O>; bytes: number }>;

/**
 * A @grpc/grpc-js client with its default options, as a runtime that generated a client from the
 * proto alone would have: a reply over 4 MiB fails with RESOURCE_EXHAUSTED on its side.
 */
function defaultGrpcClient(url: string) {
  const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure());
  const unary =
    <I extends DescMessage, O extends DescMessage>(
      method: string,
      input: I,
      output: O,
    ): Unary<I, O> =>
    (request) =>
      new Promise((resolve, reject) => {
        let bytes = 0;
        client.makeUnaryRequest(
          `/spillway.v1.SpillwayService/${method}`,
          (message: MessageShape<I>) => Buffer.from(toBinary(input, message)),
          (buffer: Buffer) => {
            bytes = buffer.byteLength;
            return fromBinary(output, buffer);
          },
          request,
          (err, response) => {
            if (err !== null || response === undefined) reject(err);
            else resolve({ response, bytes });
          },
        );
      });
  return {
    offloadBatch: unary("OffloadBatch", OffloadBatchRequestSchema, OffloadBatchResponseSchema),
    listToolOutputs: unary(
      "ListToolOutputs",
      ListToolOutputsRequestSchema,
      ListToolOutputsResponseSchema,
    ),
    close: () => client.close(),
  };
}

/** 240,000 bytes of four-byte characters, each payload its own. */
const wideText = (seed: number) =>
  Buffer.from(String.fromCodePoint(0x1f600 + (seed % 64)).repeat(60_000), "utf8");

const wideItem = (runId: string, callId: string) => ({
  header: {
    key: { tenant: "dev", runId, callId },
    contentType: "text/plain",
    preview: { headChars: 20_000, tailChars: 20_000 },
  },
  data: wideText(callId.length),
});

describe("replies fit a default gRPC client's 4 MiB receive limit", () => {
  let t: TestServer;
  let grpcClient: ReturnType<typeof defaultGrpcClient>;
  beforeAll(async () => {
    t = await startTestServer();
    grpcClient = defaultGrpcClient(t.url);
  });
  afterAll(async () => {
    grpcClient.close();
    await t.stop();
  });

  it("cuts a ListToolOutputs page by size, so a default client pages through every record once", async () => {
    const runId = "listed";
    const handles: string[] = [];
    for (let at = 0; at < 30; ) {
      const items = Array.from({ length: 10 }, (_, i) => wideItem(runId, `c${at + i}`));
      const { response } = await grpcClient.offloadBatch(
        create(OffloadBatchRequestSchema, { items }),
      );
      for (const { result } of response.results) {
        if (result.case === "offloaded") handles.push(result.value.attachment?.handle ?? "");
        else break;
        at++;
      }
    }
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const { response, bytes } = await grpcClient.listToolOutputs(
        create(ListToolOutputsRequestSchema, { runId, pageSize: 1000, pageToken }),
      );
      expect(bytes).toBeLessThanOrEqual(defaultReceiveLimit);
      expect(response.attachments.length).toBeGreaterThan(0);
      seen.push(...response.attachments.map((a) => a.handle));
      pageToken = response.nextPageToken;
      pages++;
    } while (pageToken !== "");
    expect(pages).toBeGreaterThan(1);
    expect(seen).toEqual([...handles].sort());
  });

});
