import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import * as net from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import {
  GetServerInfoResponseSchema,
  OffloadRequestSchema,
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
  SpillwayService,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { dataFrame, dataFramePath } from "@spillway/wire";
import { afterEach, describe, expect, it } from "vitest";
import { failureOf } from "../../../test/support/code-of.js";
import { createGrpcTransport } from "./grpc-transport.js";
import type { SplitBytesField } from "./response-queue.js";
import { createWideWindowSessionManager } from "./session-manager.js";

/** What a hand-written gRPC server does with one call. */
type Answer = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;

const servers: http2.Http2Server[] = [];
const managers: Http2SessionManager[] = [];

afterEach(async () => {
  for (const m of managers.splice(0)) m.abort();
  await Promise.all(
    servers.splice(0).map((s) => new Promise((resolve) => s.close(() => resolve(undefined)))),
  );
});

/** Data frames handed out in pieces, as the SDK's client asks. */
const dataFrames: SplitBytesField[] = [
  { output: ReadToolOutputResponseSchema, path: dataFramePath, message: dataFrame },
];

/** Starts an h2c server answering every call with `answer` and returns its origin. */
async function serveWith(answer: Answer): Promise<string> {
  const server = http2.createServer();
  // Resets and aborted sessions are what these servers are for; they are not test failures.
  server.on("session", (session) => session.on("error", () => {}));
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    answer(stream, headers);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Starts an h2c server answering every call with `answer` and returns a client for it. */
async function clientFor(
  answer: Answer,
  readMaxBytes = 4 * 1024 * 1024,
  bytesFields: readonly SplitBytesField[] = [],
) {
  const baseUrl = await serveWith(answer);
  const sessionManager = createWideWindowSessionManager(baseUrl);
  managers.push(sessionManager);
  return createClient(
    SpillwayService,
    createGrpcTransport({ baseUrl, sessionManager, readMaxBytes, bytesFields }),
  );
}

const okHeaders = { ":status": 200, "content-type": "application/grpc" };

/** Reads the whole request, then runs `then`. */
function afterRequest(stream: http2.ServerHttp2Stream, then: () => void): void {
  stream.on("data", () => {});
  stream.on("end", then);
}

const serverInfo = (version: string) =>
  Buffer.from(
    encodeEnvelope(
      0,
      toBinary(GetServerInfoResponseSchema, create(GetServerInfoResponseSchema, { version })),
    ),
  );

/** Answers a call, once its request has ended, with GetServerInfo's `version` and status 0. */
const answerInfo =
  (version: string): Answer =>
  (stream) =>
    afterRequest(stream, () => {
      stream.respond(okHeaders, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(serverInfo(version));
    });

/**
 * Runs `use` with a URL whose connections pass through a proxy to `port`, and returns the DATA
 * frames the client sent (stream, payload length, END_STREAM) in order.
 */
async function dataFramesThrough(
  port: number,
  use: (url: string) => Promise<void>,
): Promise<{ stream: number; length: number; endStream: boolean }[]> {
  const frames: { stream: number; length: number; endStream: boolean }[] = [];
  const sockets: net.Socket[] = [];
  const proxy = net.createServer((client) => {
    sockets.push(client);
    const upstream = net.connect(port, "127.0.0.1");
    let pending = Buffer.alloc(0);
    let prefaceLeft = 24;
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      const skip = Math.min(prefaceLeft, pending.length);
      pending = pending.subarray(skip);
      prefaceLeft -= skip;
      while (pending.length >= 9) {
        const length = pending.readUIntBE(0, 3);
        if (pending.length < 9 + length) break;
        const [type, flags] = [pending[3], pending[4] ?? 0];
        if (type === 0) {
          const stream = pending.readUInt32BE(5) & 0x7fffffff;
          frames.push({ stream, length, endStream: (flags & 1) === 1 });
        }
        pending = pending.subarray(9 + length);
      }
    });
    upstream.on("data", (chunk) => client.write(chunk));
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on("close", () => b.destroy());
      a.on("error", () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    await use(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => proxy.close(resolve));
  }
  return frames;
}

describe("createGrpcTransport", () => {
  it("keeps a base URL's path as the prefix of every method, and refuses another origin", async () => {
    const paths: string[] = [];
    const origin = await serveWith((stream, headers) => {
      paths.push(String(headers[":path"]));
      answerInfo("v")(stream, headers);
    });
    const sessionManager = createWideWindowSessionManager(origin);
    managers.push(sessionManager);
    const via = (baseUrl: string) =>
      createClient(
        SpillwayService,
        createGrpcTransport({ baseUrl, sessionManager, readMaxBytes: 1 << 20 }),
      );
    for (let i = 0; i < 2; i++) {
      expect((await via(`${origin}/prefix`).getServerInfo({})).version).toBe("v");
    }
    expect(paths).toEqual(Array(2).fill("/prefix/spillway.v1.SpillwayService/GetServerInfo"));
    const err = await failureOf(via("http://127.0.0.2:1").getServerInfo({}));
    expect(err.code).toBe(Code.Internal);
    expect(err.rawMessage).toBe(
      `cannot make a request to http://127.0.0.2:1: the http2 session is connected to ${origin}`,
    );
  });

  it("ends a unary or server-streaming request in the DATA frame of its message", async () => {
    const origin = await serveWith(answerInfo("v"));
    const frames = await dataFramesThrough(Number(new URL(origin).port), async (url) => {
      const sessionManager = createWideWindowSessionManager(url);
      managers.push(sessionManager);
      const client = createClient(
        SpillwayService,
        createGrpcTransport({ baseUrl: url, sessionManager, readMaxBytes: 1 << 20 }),
      );
      await client.getServerInfo({});
      // Only the request's frames matter here, not what the answer decodes to.
      await (async () => {
        for await (const _ of client.readToolOutput({ runId: "r", handle: "h" })) break;
      })().catch(() => undefined);
      sessionManager.abort();
    });
    // Each request: one DATA frame, its envelope, carrying END_STREAM (flag 0x1).
    expect(frames).toEqual([
      { stream: 1, length: 5, endStream: true },
      { stream: 3, length: 11, endStream: true },
    ]);
  });

  it("sends a unary call and reads its answer and trailer", async () => {
    let seen: http2.IncomingHttpHeaders = {};
    const client = await clientFor((stream, headers) => {
      seen = headers;
      afterRequest(stream, () => {
        stream.respond(okHeaders, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "x-t": "1" }));
        stream.end(serverInfo("9.9.9"));
      });
    });
    let trailer: Headers | undefined;
    const res = await client.getServerInfo(
      {},
      { timeoutMs: 5000, onTrailer: (t) => (trailer = t) },
    );
    expect(res.version).toBe("9.9.9");
    expect(trailer?.get("x-t")).toBe("1");
    expect(seen[":path"]).toBe("/spillway.v1.SpillwayService/GetServerInfo");
    expect(seen["content-type"]).toBe("application/grpc+proto");
    expect(seen.te).toBe("trailers");
    expect(seen["grpc-timeout"]).toMatch(/^\d+m$/);
  });

  it("reports a trailers-only error with its code and message", async () => {
    const client = await clientFor((stream) =>
      afterRequest(stream, () =>
        stream.respond(
          { ...okHeaders, "grpc-status": String(Code.NotFound), "grpc-message": "no%20such" },
          { endStream: true },
        ),
      ),
    );
    const err = await failureOf(client.getServerInfo({}));
    expect(err.code).toBe(Code.NotFound);
    expect(err.rawMessage).toBe("no such");
  });

  it("fails a request it cannot encode with INVALID_ARGUMENT, however the server answers", async () => {
    const client = await clientFor(answerInfo("9.9.9"));
    const window = {
      runId: "r",
      handle: "res_a",
      // A BigInt where the proto has an int32: what untyped JavaScript can pass.
      window: { case: "lines", value: { offset: 0n, limit: 3n as unknown as number } },
    } as const;
    const err = await failureOf(
      (async () => {
        for await (const _ of client.readToolOutput(window)) {
          // The call fails before any message.
        }
      })(),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toContain("spillway.v1.LinesWindow.limit");
  });

  it("takes a unary call's status from the trailer when the header carries one too", async () => {
    // As connect's own gRPC transport: a status in real trailers wins over one in the header.
    const client = await clientFor((stream) =>
      afterRequest(stream, () => {
        stream.respond(
          { ...okHeaders, "grpc-status": String(Code.ResourceExhausted) },
          { waitForTrailers: true },
        );
        stream.once("wantTrailers", () =>
          stream.sendTrailers({ "grpc-status": String(Code.FailedPrecondition), foo: "bar" }),
        );
        stream.end();
      }),
    );
    const err = await failureOf(client.getServerInfo({}));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.metadata.get("foo")).toBe("bar");
  });

  it("hands out streamed messages before the error status that follows them", async () => {
    const frame = dataFrame(new Uint8Array([1, 2]));
    const client = await clientFor((stream) =>
      afterRequest(stream, () => {
        stream.respond(okHeaders, { waitForTrailers: true });
        stream.on("wantTrailers", () =>
          stream.sendTrailers({ "grpc-status": String(Code.DataLoss), "grpc-message": "bad" }),
        );
        stream.end(Buffer.from(encodeEnvelope(0, toBinary(ReadToolOutputResponseSchema, frame))));
      }),
    );
    const got: number[] = [];
    const err = await failureOf(
      (async () => {
        for await (const f of client.readToolOutput({ runId: "r", handle: "h" })) {
          if (f.frame.case === "content" && f.frame.value.body.case === "data") {
            got.push(...f.frame.value.body.value);
          }
        }
      })(),
    );
    expect(got).toEqual([1, 2]);
    expect(err.code).toBe(Code.DataLoss);
  });

  it("maps a refused stream to UNAVAILABLE and a reset stream to a retryable INTERNAL", async () => {
    const refused = await clientFor((stream) =>
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM),
    );
    expect((await failureOf(refused.getServerInfo({}))).code).toBe(Code.Unavailable);
    const reset = await clientFor((stream) => {
      stream.respond(okHeaders);
      // Destroyed mid-message, as a proxy resets a call whose replica died (close() would
      // end the stream cleanly first).
      stream.write(serverInfo("1").subarray(0, 3), () => stream.destroy(new Error("gone")));
    });
    const err = await failureOf(reset.getServerInfo({}));
    expect(err.code).toBe(Code.Internal);
    expect(err.rawMessage).toMatch(/stream closed with error code (NGHTTP2_)?INTERNAL_ERROR/i);
  });

  it("fails a body that ends inside a message, and a response without a status", async () => {
    const cut = await clientFor((stream) =>
      afterRequest(stream, () => {
        stream.respond(okHeaders, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(serverInfo("1.2.3").subarray(0, 6));
      }),
    );
    const incomplete = await failureOf(cut.getServerInfo({}));
    expect(incomplete.code).toBe(Code.Internal);
    expect(incomplete.rawMessage).toMatch(/incomplete envelope/);
    const silent = await clientFor((stream) =>
      afterRequest(stream, () => {
        stream.respond(okHeaders);
        stream.end(serverInfo("1.2.3"));
      }),
    );
    const missing = await failureOf(silent.getServerInfo({}));
    expect(missing.code).toBe(Code.Internal);
    expect(missing.rawMessage).toMatch(/missing status/);
  });

  it("refuses a compressed response it never asked for and one over readMaxBytes", async () => {
    const gzip = await clientFor((stream) =>
      afterRequest(stream, () => {
        stream.respond({ ...okHeaders, "grpc-encoding": "gzip" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(serverInfo("1"));
      }),
    );
    expect((await failureOf(gzip.getServerInfo({}))).code).toBe(Code.Internal);
    const large = await clientFor(
      (stream) =>
        afterRequest(stream, () => {
          stream.respond(okHeaders, { waitForTrailers: true });
          stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
          stream.end(serverInfo("x".repeat(200)));
        }),
      100,
    );
    expect((await failureOf(large.getServerInfo({}))).code).toBe(Code.ResourceExhausted);
  });

  it("maps a proxy's HTTP error status to the gRPC code", async () => {
    const client = await clientFor((stream) =>
      afterRequest(stream, () => stream.respond({ ":status": 502 }, { endStream: true })),
    );
    expect((await failureOf(client.getServerInfo({}))).code).toBe(Code.Unavailable);
  });

  it("cancels the stream when the caller aborts, and reports CANCELED", async () => {
    let reset: Promise<number> | undefined;
    const client = await clientFor((stream) => {
      reset = new Promise((resolve) => stream.on("close", () => resolve(stream.rstCode)));
      stream.respond(okHeaders);
    });
    const abort = new AbortController();
    const call = client.getServerInfo({}, { signal: abort.signal });
    await new Promise((resolve) => setTimeout(resolve, 100));
    abort.abort();
    expect((await failureOf(call)).code).toBe(Code.Canceled);
    expect(await reset).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it("reports a call whose connection the server's side closed under it UNAVAILABLE, not CANCELED", async () => {
    // As a server killed outright: its connection goes, with no status and no RST_STREAM, and
    // Node closes the client's stream with a CANCEL of its own.
    const sockets: net.Socket[] = [];
    const client = await clientFor((stream) =>
      stream.once("data", () => {
        for (const socket of sockets) socket.destroy();
      }),
    );
    servers.at(-1)?.on("connection", (socket: net.Socket) => sockets.push(socket));
    const err = await failureOf(
      client.offload(
        (async function* () {
          yield create(OffloadRequestSchema, {
            msg: { case: "chunk", value: new Uint8Array(1024) },
          });
          await new Promise((resolve) => setTimeout(resolve, 2_000));
        })(),
      ),
    );
    expect(err.code).toBe(Code.Unavailable);
    expect(err.rawMessage).toContain("connection closed before the call ended");
  });

  it("reports a server's own RST_STREAM CANCEL on an open connection CANCELED", async () => {
    const client = await clientFor((stream) =>
      afterRequest(stream, () => stream.close(http2.constants.NGHTTP2_CANCEL)),
    );
    const err = await failureOf(client.getServerInfo({}));
    expect(err.code).toBe(Code.Canceled);
    expect(err.rawMessage).toBe("http/2 stream closed with error code CANCEL (0x8)");
    // The connection stays open for the next call.
    expect((await failureOf(client.getServerInfo({}))).code).toBe(Code.Canceled);
  });

  it("cancels the stream of a server-streaming call its caller stops reading (break)", async () => {
    let reset: Promise<number> | undefined;
    const frame = Buffer.from(
      encodeEnvelope(
        0,
        toBinary(ReadToolOutputResponseSchema, dataFrame(new Uint8Array([1, 2, 3]))),
      ),
    );
    const client = await clientFor((stream) => {
      reset = new Promise((resolve) => stream.on("close", () => resolve(stream.rstCode)));
      afterRequest(stream, () => {
        stream.respond(okHeaders);
        // A response that would never end on its own.
        const tick = setInterval(() => {
          if (stream.closed) clearInterval(tick);
          else stream.write(frame);
        }, 5);
      });
    });
    let seen = 0;
    for await (const _ of client.readToolOutput({ runId: "r", handle: "h" })) {
      if (++seen === 2) break;
    }
    expect(seen).toBe(2);
    expect(await reset).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it("ends, not resets, a request the server answered early, and settles without waiting for it", async () => {
    const closed: Promise<number>[] = [];
    let streamsClosed = 0;
    const client = await clientFor((stream) => {
      closed.push(
        new Promise((resolve) =>
          stream.on("close", () => {
            streamsClosed++;
            resolve(stream.rstCode);
          }),
        ),
      );
      // Refused at once. The second server reads no more once it has seen some of the request
      // (Node would otherwise reset a stream whose request nobody started to read).
      if (closed.length === 2) stream.once("data", () => stream.pause());
      // Headers, then the status in trailers, as Spillway's server answers.
      stream.respond(okHeaders, { waitForTrailers: true });
      stream.on("wantTrailers", () =>
        stream.sendTrailers({
          "grpc-status": String(Code.ResourceExhausted),
          "grpc-message": "full",
        }),
      );
      stream.end();
    });
    const offload = (chunkBytes: number) =>
      client.offload(
        (async function* () {
          yield create(OffloadRequestSchema, {
            msg: { case: "chunk", value: new Uint8Array(chunkBytes) },
          });
          // The rest of the payload is on its way when the answer comes.
          await new Promise((resolve) => setTimeout(resolve, 200));
          yield create(OffloadRequestSchema, { msg: { case: "chunk", value: new Uint8Array(8) } });
        })(),
      );

    // What was sent fits the server's window: the client ends its side, nothing is reset.
    expect((await failureOf(offload(1024))).code).toBe(Code.ResourceExhausted);
    expect(await closed[0]).toBe(http2.constants.NGHTTP2_NO_ERROR);

    // Stuck behind a server that never reads: the verdict comes at once, and the stream is
    // reset only once the client has given up waiting for it to close.
    const err = await failureOf(offload(1024 * 1024));
    expect(err.code).toBe(Code.ResourceExhausted);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(streamsClosed).toBe(1);
    expect(await closed[1]).toBe(http2.constants.NGHTTP2_CANCEL);
  }, 30_000);

  it("cancels a call aborted while its stream was still being opened", async () => {
    const client = await clientFor(answerInfo("1"));
    await client.getServerInfo({});
    const abort = new AbortController();
    const call = client.getServerInfo({}, { signal: abort.signal });
    abort.abort();
    expect((await failureOf(call)).code).toBe(Code.Canceled);
  });

  it("ends a call past its deadline with DEADLINE_EXCEEDED", async () => {
    const client = await clientFor((stream) => stream.respond(okHeaders));
    expect((await failureOf(client.getServerInfo({}, { timeoutMs: 200 }))).code).toBe(
      Code.DeadlineExceeded,
    );
  });

  it("fails a streaming call that ends before its caller reads it without an unhandled rejection", async () => {
    // connect's promise client awaits a server-streaming or bidi call's response only once its
    // caller first reads: a call that ends before then must leave its failure for that read,
    // not crash the process.
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", record);
    try {
      // A server that never answers: the call ends at its deadline, or when its caller aborts.
      const client = await clientFor(() => {});
      const abort = new AbortController();
      const timedOut = client.readToolOutput({ runId: "r", handle: "h" }, { timeoutMs: 5 });
      const aborted = client.readToolOutput({ runId: "r", handle: "h" }, { signal: abort.signal });
      setTimeout(() => abort.abort(), 5);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(unhandled).toEqual([]);
      const first = (it: AsyncIterable<unknown>) => it[Symbol.asyncIterator]().next();
      expect((await failureOf(first(timedOut))).code).toBe(Code.DeadlineExceeded);
      expect((await failureOf(first(aborted))).code).toBe(Code.Canceled);
    } finally {
      process.off("unhandledRejection", record);
    }
  });

  it.each([
    ["whole", []],
    ["in pieces", dataFrames],
  ] as const)(
    "holds back a server whose messages are not consumed (data frames %s)",
    async (_, split) => {
      const message = Buffer.from(
        encodeEnvelope(
          0,
          toBinary(ReadToolOutputResponseSchema, dataFrame(new Uint8Array(1024 * 1024))),
        ),
      );
      let written = 0;
      const total = 200;
      const client = await clientFor(
        (stream) =>
          afterRequest(stream, async () => {
            stream.respond(okHeaders);
            const closed = new Promise((resolve) => stream.once("close", resolve));
            for (let i = 0; i < total && !stream.closed; i++) {
              if (!stream.write(message, () => written++)) {
                await Promise.race([
                  closed,
                  new Promise((resolve) => stream.once("drain", resolve)),
                ]);
              }
            }
          }),
        4 * 1024 * 1024,
        split,
      );
      const abort = new AbortController();
      const frames = client.readToolOutput({ runId: "r", handle: "h" }, { signal: abort.signal });
      const first = await frames[Symbol.asyncIterator]().next();
      expect(first.done).toBe(false);
      // Wait until the server can write no more, then check how far it got.
      let last = -1;
      while (last !== written) {
        last = written;
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      abort.abort();
      // The 32 MiB receive window and the few parsed messages held bound what is sent.
      expect(written).toBeGreaterThan(0);
      expect(written).toBeLessThan(total / 2);
    },
  );

  it("hands out a data frame in pieces as it arrives, and every other message whole", async () => {
    const data = Buffer.alloc(1024 * 1024 + 3);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
    const frames = [
      create(ReadToolOutputResponseSchema, { frame: { case: "header", value: { handle: "h" } } }),
      dataFrame(data),
      create(ReadToolOutputResponseSchema, {
        frame: { case: "trailer", value: { rendered: "r" } },
      }),
    ];
    const answer: Answer = (stream) =>
      afterRequest(stream, () => {
        stream.respond(okHeaders, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(
          Buffer.concat(
            frames.map((f) => encodeEnvelope(0, toBinary(ReadToolOutputResponseSchema, f))),
          ),
        );
      });
    for (const split of [[], dataFrames]) {
      const client = await clientFor(answer, 4 * 1024 * 1024, split);
      const got: ReadToolOutputResponse[] = [];
      for await (const frame of client.readToolOutput({ runId: "r", handle: "h" })) got.push(frame);
      const cases = got.map((f) => f.frame.case);
      const pieces = got.flatMap((f) =>
        f.frame.case === "content" && f.frame.value.body.case === "data"
          ? [f.frame.value.body.value]
          : [],
      );
      expect(cases[0]).toBe("header");
      expect(cases.at(-1)).toBe("trailer");
      expect(cases.slice(1, -1).every((c) => c === "content")).toBe(true);
      expect(Buffer.concat(pieces).equals(data)).toBe(true);
      if (split.length === 0) {
        expect(pieces).toHaveLength(1);
      } else {
        // One piece per HTTP/2 DATA frame (16 KiB by default), none of them assembled.
        expect(pieces.length).toBeGreaterThanOrEqual(64);
        for (const piece of pieces) expect(piece.byteLength).toBeLessThanOrEqual(16 * 1024);
      }
    }
  });
});
