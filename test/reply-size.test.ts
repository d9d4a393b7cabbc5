import {
  create,
  type DescMessage,
  fromBinary,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import {
  ListToolOutputsRequestSchema,
  ListToolOutputsResponseSchema,
  OffloadBatchRequestSchema,
  OffloadBatchResponseSchema,
  ReadToolOutputRequestSchema,
  ReadToolOutputResponseSchema,
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
  type Frame = MessageShape<typeof ReadToolOutputResponseSchema>;
  const readToolOutput = (request: MessageShape<typeof ReadToolOutputRequestSchema>) =>
    new Promise<{ frames: Frame[]; sizes: number[] }>((resolve, reject) => {
      const frames: Frame[] = [];
      const sizes: number[] = [];
      const call = client.makeServerStreamRequest(
        "/spillway.v1.SpillwayService/ReadToolOutput",
        (message: typeof request) => Buffer.from(toBinary(ReadToolOutputRequestSchema, message)),
        (buffer: Buffer) => {
          sizes.push(buffer.byteLength);
          return fromBinary(ReadToolOutputResponseSchema, buffer);
        },
        request,
      );
      call.on("data", (frame: Frame) => frames.push(frame));
      call.on("error", reject);
      call.on("end", () => resolve({ frames, sizes }));
    });
  return {
    readToolOutput,
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

  it("answers a batch whose records would not fit with the items that do, and ABORTED for the rest", async () => {
    // The outside tester's batch: 15 records of ~320 KB each, 4.8 MB in one reply.
    const items = Array.from({ length: 15 }, (_, i) => wideItem("wide", `c${i}`));
    const request = create(OffloadBatchRequestSchema, { items });
    const { response, bytes } = await grpcClient.offloadBatch(request);
    expect(bytes).toBeLessThanOrEqual(defaultReceiveLimit);
    const cases = response.results.map((r) => r.result.case);
    expect(cases).toHaveLength(15);
    const firstRefused = cases.indexOf("error");
    expect(firstRefused).toBeGreaterThan(0);
    // In request order: the items that fit, then only refusals.
    expect(cases.slice(0, firstRefused).every((c) => c === "offloaded")).toBe(true);
    for (const { result } of response.results.slice(firstRefused)) {
      expect(result.case).toBe("error");
      if (result.case !== "error") continue;
      expect(result.value.code).toBe(Code.Aborted);
      expect(result.value.message).toContain("send it again");
    }
    // A refused item committed nothing; sent again, it commits.
    const listed = await t.sdk().list("wide");
    expect(listed.attachments).toHaveLength(firstRefused);
    const again = await grpcClient.offloadBatch(
      create(OffloadBatchRequestSchema, { items: items.slice(firstRefused) }),
    );
    expect(again.response.results.every((r) => r.result.case === "offloaded")).toBe(true);
    // The same batch once more replays every item; the replays fit the same way.
    const replay = await grpcClient.offloadBatch(request);
    expect(replay.bytes).toBeLessThanOrEqual(defaultReceiveLimit);
  });

  it("keeps a batch of 1,000 items with the largest answers and long errors within 4 MiB", async () => {
    const runId = "r".repeat(128);
    // 128-byte call ids, names and content types whose control characters the preview's first
    // line escapes to six bytes each, and a whole payload of four-byte characters in the head.
    const callId = (i: number) => `${String(i).padStart(4, "0")}${"_".repeat(124)}`;
    const item = (i: number, data: Buffer) => ({
      header: {
        key: { tenant: "dev", runId, callId: callId(i) },
        name: "\u0001".repeat(256),
        contentType: "\u0002".repeat(256),
        preview: { headChars: 20_000, tailChars: 20_000 },
      },
      data,
    });
    // Every tenth output is there already with other bytes: ALREADY_EXISTS, naming the handle.
    const taken = Array.from({ length: 100 }, (_, k) => item(k * 10, Buffer.from("other\n")));
    await grpcClient.offloadBatch(create(OffloadBatchRequestSchema, { items: taken }));
    const data = Buffer.from("\u{10348}".repeat(850), "utf8");
    const items = Array.from({ length: 1000 }, (_, i) => item(i, data));
    const request = create(OffloadBatchRequestSchema, { items });
    expect(toBinary(OffloadBatchRequestSchema, request).byteLength).toBeLessThan(
      4 * 1024 * 1024 + 64 * 1024,
    );
    let pending = items.map((_, i) => i);
    let rounds = 0;
    const codes = new Map<number, number>();
    while (pending.length > 0) {
      const { response, bytes } = await grpcClient.offloadBatch(
        create(OffloadBatchRequestSchema, { items: pending.map((i) => items[i] ?? item(i, data)) }),
      );
      expect(bytes).toBeLessThanOrEqual(defaultReceiveLimit);
      const refused: number[] = [];
      response.results.forEach(({ result }, at) => {
        const i = pending[at] ?? -1;
        if (result.case === "error" && result.value.code === Code.Aborted) refused.push(i);
        else if (result.case === "error") codes.set(i, result.value.code);
      });
      expect(refused.length).toBeLessThan(pending.length);
      pending = refused;
      rounds++;
    }
    expect(rounds).toBeGreaterThan(1);
    expect([...codes.keys()].sort((a, b) => a - b)).toEqual(taken.map((_, k) => k * 10));
    expect(new Set(codes.values())).toEqual(new Set([Code.AlreadyExists]));
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

  it("splits a window's content frames so that each fits, the matches the same and in order", async () => {
    // Lines of 2,000 four-byte characters, each a match, with 20 lines of context: a line
    // travels in up to 41 matches, and one frame of them came to 4.5 MB.
    const line = "\u{1F600}".repeat(2000);
    const payload = Array.from({ length: 60 }, () => line).join("\n");
    await t.sdk().offload({ tenant: "dev", runId: "frames", callId: "wide" }, payload);
    const request = create(ReadToolOutputRequestSchema, {
      runId: "frames",
      handle: "res_wide",
      window: {
        case: "search",
        value: { pattern: "\u{1F600}", contextLines: 20, maxMatches: 1000 },
      },
    });
    const { frames, sizes } = await grpcClient.readToolOutput(request);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(defaultReceiveLimit);
    const matches = frames.flatMap((f) =>
      f.frame.case === "content" && f.frame.value.body.case === "matches"
        ? f.frame.value.body.value.matches
        : [],
    );
    const trailer = frames.at(-1)?.frame;
    expect(trailer?.case).toBe("trailer");
    if (trailer?.case !== "trailer") return;
    expect(matches.map((m) => Number(m.line?.number))).toEqual(
      Array.from({ length: Number(trailer.value.returnedMatches) }, (_, i) => i + 1),
    );
    expect(matches.every((m) => m.line?.text === line)).toBe(true);
    // The same window whole, over a client without the limit.
    const whole = [];
    for await (const frame of t.raw().readToolOutput(request)) whole.push(frame);
    const wholeMatches = whole.flatMap((f) =>
      f.frame.case === "content" && f.frame.value.body.case === "matches"
        ? f.frame.value.body.value.matches
        : [],
    );
    expect(matches).toEqual(wholeMatches);
  });
});
