import { mkdtemp, rm } from "node:fs/promises";
import * as http2 from "node:http2";
import { connect as connectTcp, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import {
  ReadToolOutputRequestSchema,
  StatToolOutputRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { codeOf } from "./support/code-of.js";
import { openGrpcStream } from "./support/raw-grpc.js";
import { writeSelfSigned } from "./support/self-signed.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/** What a raw gRPC stream ended with: its grpc-status and message, or the reset it got. */
interface Outcome {
  readonly status: number | undefined;
  readonly message: string | undefined;
  readonly rstCode: number;
}

/**
 * Resolves once the stream has its gRPC status (trailers, or a trailers-only response) or is
 * closed; the client then closes its side, as a client does once its call is answered.
 */
function outcomeOf(stream: http2.ClientHttp2Stream): Promise<Outcome> {
  return new Promise((resolve) => {
    const done = (headers: http2.IncomingHttpHeaders | undefined) => {
      const status = headers?.["grpc-status"];
      const message = headers?.["grpc-message"];
      resolve({
        status: status === undefined ? undefined : Number(status),
        message: typeof message === "string" ? decodeURIComponent(message) : undefined,
        rstCode: stream.rstCode ?? 0,
      });
      if (!stream.destroyed) stream.close();
    };
    stream.on("response", (headers) => {
      if (headers["grpc-status"] !== undefined) done(headers);
    });
    stream.on("trailers", (headers) => done(headers));
    stream.on("error", () => {});
    stream.on("close", () => done(undefined));
    stream.resume();
  });
}

/** Rejects when the promise takes longer than ms: the awaited stream was never ended. */
function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

function authHeader(token: string | undefined): http2.OutgoingHttpHeaders {
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}

const idleMs = 1000;

/**
 * 300 ReadToolOutput streams that never send their request, on one connection: more than a
 * tenant's 256 call slots. Each one must end DEADLINE_EXCEEDED after the idle timeout (or be
 * refused RESOURCE_EXHAUSTED at once, past the slots), after which the tenant calls again.
 */
async function silentReadsEndAndFree(t: TestServer, token: string | undefined, tenant: string) {
  await t.sdk(token).offload({ tenant, runId: "r", callId: "kept" }, "kept\n");
  const session = http2.connect(t.url);
  try {
    const streams = Array.from({ length: 300 }, () =>
      openGrpcStream(session, "ReadToolOutput", authHeader(token)),
    );
    const outcomes = Promise.all(streams.map(outcomeOf));
    // The silent streams hold every slot of the tenant: its next call is refused.
    let refused: Code | undefined;
    for (let i = 0; i < 250 && refused !== Code.ResourceExhausted; i++) {
      refused = await codeOf(t.sdk(token).stat("r", "res_kept"));
      if (refused !== Code.ResourceExhausted) await new Promise((r) => setTimeout(r, 20));
    }
    expect(refused).toBe(Code.ResourceExhausted);

    const ended = await within(idleMs + 10_000, outcomes, "the silent streams were not ended");
    const timedOut = ended.filter((o) => o.status === Code.DeadlineExceeded);
    const turnedAway = ended.filter((o) => o.status === Code.ResourceExhausted);
    expect(timedOut.length + turnedAway.length).toBe(300);
    // Every slot was taken by a silent stream; a few of the tenant's polls may have held one.
    expect(timedOut.length).toBeGreaterThanOrEqual(250);
    expect(timedOut[0]?.message).toBe(`the ReadToolOutput request sent nothing for ${idleMs} ms`);

    // The tenant calls again, on a new connection and on the very one the streams were on.
    expect((await t.sdk(token).stat("r", "res_kept")).sizeBytes).toBe(5n);
    const again = openGrpcStream(session, "StatToolOutput", authHeader(token));
    again.end(
      encodeEnvelope(
        0,
        toBinary(
          StatToolOutputRequestSchema,
          create(StatToolOutputRequestSchema, { runId: "r", handle: "res_kept" }),
        ),
      ),
    );
    expect((await outcomeOf(again)).status).toBe(0);
  } finally {
    session.destroy();
  }
}

describe("calls whose request never arrives", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: "memory",
      tokens: { a: "tenant-a", b: "tenant-b" },
      limits: { idleStreamMs: idleMs },
    });
  });
  afterAll(() => t.stop());

  it("ends 300 silent read streams on one connection with DEADLINE_EXCEEDED and frees the tenant's slots", async () => {
    await t.sdk("b").offload({ tenant: "tenant-b", runId: "r", callId: "other" }, "other\n");
    const held = silentReadsEndAndFree(t, "a", "tenant-a");
    // Meanwhile another tenant is served as usual.
    expect((await t.sdk("b").stat("r", "res_other")).sizeBytes).toBe(6n);
    await held;
    expect((await t.sdk("b").stat("r", "res_other")).sizeBytes).toBe(6n);
  });

  it("ends a unary call whose request never comes, or never ends, with DEADLINE_EXCEEDED", async () => {
    const session = http2.connect(t.url);
    try {
      const silent = openGrpcStream(session, "StatToolOutput", authHeader("a"));
      // The whole message, but the client never ends its side of the stream.
      const unended = openGrpcStream(session, "StatToolOutput", authHeader("a"));
      unended.write(
        encodeEnvelope(
          0,
          toBinary(
            StatToolOutputRequestSchema,
            create(StatToolOutputRequestSchema, { runId: "r", handle: "res_kept" }),
          ),
        ),
      );
      const [a, b] = await within(
        idleMs + 10_000,
        Promise.all([outcomeOf(silent), outcomeOf(unended)]),
        "the unary calls were not ended",
      );
      expect(a?.status).toBe(Code.DeadlineExceeded);
      expect(a?.message).toBe(`the StatToolOutput request sent nothing for ${idleMs} ms`);
      expect(b?.status).toBe(Code.DeadlineExceeded);
    } finally {
      session.destroy();
    }
  });
});

/** What an HTTP/2 response carried: status, headers and trailers merged, and its body as text. */
interface HttpAnswer {
  readonly status: number;
  readonly headers: http2.IncomingHttpHeaders;
  readonly body: string;
}

function httpAnswerOf(stream: http2.ClientHttp2Stream): Promise<HttpAnswer> {
  return new Promise((resolve) => {
    let status = 0;
    let headers: http2.IncomingHttpHeaders = {};
    let body = "";
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      headers = { ...headers, ...h };
    });
    stream.on("trailers", (h) => {
      headers = { ...headers, ...h };
    });
    stream.on("data", (chunk: Buffer) => {
      body += chunk.toString("latin1");
    });
    stream.on("error", () => {});
    stream.on("end", () => {
      resolve({ status, headers, body });
      if (!stream.destroyed) stream.close();
    });
  });
}

describe("calls whose request never arrives, gRPC-Web and Connect", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory", limits: { idleStreamMs: idleMs } });
  });
  afterAll(() => t.stop());

  it("answers each in its own protocol with DEADLINE_EXCEEDED", async () => {
    const session = http2.connect(t.url);
    try {
      const request = (method: string, contentType: string) =>
        session.request({
          ":method": "POST",
          ":path": `/spillway.v1.SpillwayService/${method}`,
          "content-type": contentType,
        });
      const [connectUnary, webUnary, webStream] = await within(
        idleMs + 10_000,
        Promise.all([
          httpAnswerOf(request("StatToolOutput", "application/proto")),
          httpAnswerOf(request("StatToolOutput", "application/grpc-web+proto")),
          httpAnswerOf(request("ReadToolOutput", "application/grpc-web+proto")),
        ]),
        "the calls were not answered",
      );
      expect(JSON.parse(connectUnary?.body ?? "")).toEqual({
        code: "deadline_exceeded",
        message: `the StatToolOutput request sent nothing for ${idleMs} ms`,
      });
      for (const web of [webUnary, webStream]) {
        const status =
          web?.headers["grpc-status"] ?? /grpc-status: ?(\d+)/.exec(web?.body ?? "")?.[1];
        expect(Number(status)).toBe(Code.DeadlineExceeded);
      }
    } finally {
      session.destroy();
    }
  });
});

describe("calls whose request never arrives, dev mode", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory", limits: { idleStreamMs: idleMs } });
  });
  afterAll(() => t.stop());

  it("frees the replica's only tenant after 300 silent read streams", async () => {
    await silentReadsEndAndFree(t, undefined, "dev");
  });
});

describe("a read whose client stops reading", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: "memory",
      limits: { idleStreamMs: idleMs },
      maxCallsPerTenant: 1,
    });
  });
  afterAll(() => t.stop());

  it.each([
    ["gRPC", "application/grpc"],
    ["gRPC-Web", "application/grpc-web+proto"],
  ])(
    "is reset once its response waited idle_stream_ms for the client, freeing its slot (%s)",
    async (_, contentType) => {
      await t
        .sdk()
        .offload({ tenant: "dev", runId: "r", callId: "big" }, new Uint8Array(4 * 1024 * 1024))
        .catch(() => undefined);
      // A client window of 64 KiB: the server's writes wait for the client almost at once.
      const session = http2.connect(t.url, { settings: { initialWindowSize: 65_535 } });
      try {
        const stream = openGrpcStream(session, "ReadToolOutput", { "content-type": contentType });
        stream.end(
          encodeEnvelope(
            0,
            toBinary(
              ReadToolOutputRequestSchema,
              create(ReadToolOutputRequestSchema, {
                runId: "r",
                handle: "res_big",
                omitRendered: true,
                window: { case: "bytes", value: {} },
              }),
            ),
          ),
        );
        stream.pause();
        const closed = new Promise<number>((resolve) =>
          stream.once("close", () => resolve(stream.rstCode ?? 0)),
        );
        stream.on("error", () => {});
        // The stalled read holds the tenant's one slot.
        let refused: Code | undefined;
        for (let i = 0; i < 250 && refused !== Code.ResourceExhausted; i++) {
          refused = await codeOf(t.raw().getServerInfo({}));
          if (refused !== Code.ResourceExhausted) await new Promise((r) => setTimeout(r, 20));
        }
        expect(refused).toBe(Code.ResourceExhausted);
        // No status can pass the frames the client left unread: the stream is reset, as at the
        // request deadline.
        expect(await within(idleMs + 10_000, closed, "the stalled read was not reset")).toBe(
          http2.constants.NGHTTP2_CANCEL,
        );
        expect((await t.raw().getServerInfo({})).backend).toBe("memory");
      } finally {
        session.destroy();
      }
    },
  );
});

/** A connection's lifetime events, as a client sees them. */
function goawayOrClose(session: http2.ClientHttp2Session): Promise<string> {
  return new Promise((resolve) => {
    session.once("goaway", (code) => resolve(`goaway ${code}`));
    session.once("close", () => resolve("close"));
  });
}

describe("idle connections", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory", connectionIdleMs: 300 });
  });
  afterAll(() => t.stop());

  it("sends GOAWAY to a connection with no open stream for the idle time, not while a call runs", async () => {
    const session = http2.connect(t.url);
    try {
      const ended = goawayOrClose(session);
      // A call open for four idle times keeps the connection open.
      const started = Date.now();
      const stream = openGrpcStream(session, "ReadToolOutput");
      stream.on("error", () => {});
      await new Promise((r) => setTimeout(r, 1200));
      expect(session.closed).toBe(false);
      stream.close();
      const busyMs = Date.now() - started;
      expect(busyMs).toBeGreaterThanOrEqual(1200);
      expect(await within(5000, ended, "the idle connection was not closed")).toBe(
        `goaway ${http2.constants.NGHTTP2_NO_ERROR}`,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(busyMs);
    } finally {
      session.destroy();
    }
    // Clients carry on over a new connection.
    expect((await t.raw().getServerInfo({})).backend).toBe("memory");
  });
});

describe("idle HTTP/1.1 connections (TLS)", () => {
  let dir: string;
  let server: SpillwayServer;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-idle-tls-"));
    writeSelfSigned({
      certFile: join(dir, "cert.pem"),
      keyFile: join(dir, "cert.key"),
      commonName: "localhost",
    });
    server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      tls: { certFile: join(dir, "cert.pem"), keyFile: join(dir, "cert.key") },
      connectionIdleMs: 300,
    });
  });
  afterAll(async () => {
    await server.close(1000);
    await rm(dir, { recursive: true, force: true });
  });

  it("closes an HTTP/1.1 connection that sends nothing for the idle time", async () => {
    const socket = tlsConnect({
      port: server.port,
      host: "127.0.0.1",
      rejectUnauthorized: false,
      ALPNProtocols: ["http/1.1"],
    });
    socket.on("error", () => {});
    try {
      await new Promise<void>((resolve) => socket.once("secureConnect", () => resolve()));
      expect(socket.alpnProtocol).toBe("http/1.1");
      const opened = Date.now();
      const closed = new Promise<number>((resolve) =>
        socket.once("close", () => resolve(Date.now() - opened)),
      );
      expect(
        await within(5000, closed, "the idle HTTP/1.1 connection was not closed"),
      ).toBeGreaterThanOrEqual(250);
    } finally {
      socket.destroy();
    }
  });
});

/** HTTP/2 frame types this test reads or writes. */
const SETTINGS = 0x4;
const PING = 0x6;

function frame(type: number, flags: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.byteLength, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(0, 5);
  return Buffer.concat([head, payload]);
}

describe("keepalive", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend: "memory",
      connectionIdleMs: 0,
      keepaliveMs: 200,
      keepaliveTimeoutMs: 300,
    });
  });
  afterAll(() => t.stop());

  it("closes the connection of a peer that stops answering PINGs, keeps one that answers", async () => {
    const answering = http2.connect(t.url);
    const answeringEnded = goawayOrClose(answering);
    const port = Number(new URL(t.url).port);
    const silent: Socket = connectTcp(port, "127.0.0.1");
    let pings = 0;
    let received = Buffer.alloc(0);
    silent.on("data", (data: Buffer) => {
      received = Buffer.concat([received, data]);
      while (received.byteLength >= 9) {
        const length = received.readUIntBE(0, 3);
        if (received.byteLength < 9 + length) break;
        if (received.readUInt8(3) === PING && (received.readUInt8(4) & 1) === 0) pings++;
        received = received.subarray(9 + length);
      }
    });
    const closed = new Promise<number>((resolve) => {
      const opened = Date.now();
      silent.once("close", () => resolve(Date.now() - opened));
    });
    silent.on("error", () => {});
    // A client preface and SETTINGS (and an acknowledgement of the server's), then silence.
    silent.write(
      Buffer.concat([
        Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        frame(SETTINGS, 0),
        frame(SETTINGS, 1),
      ]),
    );
    try {
      const lifetime = await within(5000, closed, "the silent peer's connection was not closed");
      expect(pings).toBeGreaterThanOrEqual(1);
      expect(lifetime).toBeGreaterThanOrEqual(200 + 300);
      // The peer that answers PINGs is still connected and served.
      expect(answering.closed || answering.destroyed).toBe(false);
      const stream = openGrpcStream(answering, "GetServerInfo");
      stream.end(encodeEnvelope(0, new Uint8Array(0)));
      expect((await outcomeOf(stream)).status).toBe(0);
      expect(
        await Promise.race([answeringEnded, new Promise((r) => setTimeout(() => r("open"), 10))]),
      ).toBe("open");
    } finally {
      silent.destroy();
      answering.destroy();
    }
  });
});
