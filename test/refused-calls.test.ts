import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";
import { offloadEnvelope, openGrpcStream } from "./support/raw-grpc.js";
import { sha256 } from "./support/read-back.js";

const maxBlobBytes = 1024 * 1024;
/** Above the 1,000 resets (and the 1,000 invalid frames) a connection is allowed at once. */
const refusals = 1_500;
const workers = 8;

/** chunks yields `size` bytes as 256 KiB chunks, announcing no size ahead. */
async function* chunks(size: number): AsyncGenerator<Uint8Array> {
  for (let sent = 0; sent < size; sent += 256 * 1024) {
    yield Buffer.alloc(Math.min(256 * 1024, size - sent), 0x61);
  }
}

/** What a raw client saw of an offload refused at its header that it went on with. */
interface HeldOpen {
  /** The status in the trailer, which came before the stream closed. */
  readonly status: number;
  /** The reset code the stream closed with. */
  readonly rstCode: number;
  /** Request bytes the client wrote after its header. */
  readonly sentAfter: number;
}

/**
 * offloadHeldOpen opens an Offload whose header announces more than max_blob_bytes, then
 * keeps the request going after the answer: writing `sendMiB` more MiB, and never ending it.
 */
function offloadHeldOpen(url: string, sendMiB: number): Promise<HeldOpen> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = openGrpcStream(session, "Offload");
    let status: number | undefined;
    let sentAfter = 0;
    stream.on("trailers", (h) => {
      status = Number(h["grpc-status"]);
    });
    stream.on("data", () => {});
    stream.on("error", () => {});
    stream.on("close", () => {
      session.close();
      if (status === undefined)
        reject(new Error(`no status before the close (rst ${stream.rstCode})`));
      else resolve({ status, rstCode: stream.rstCode, sentAfter });
    });
    stream.write(
      offloadEnvelope({
        msg: {
          case: "header",
          value: { key: { tenant: "dev", runId: "r", callId: "held" }, expectedSize: 3n << 20n },
        },
      }),
    );
    void (async () => {
      const mib = offloadEnvelope({
        msg: { case: "chunk", value: new Uint8Array(1024 * 1024 - 16) },
      });
      for (let i = 0; i < sendMiB && !stream.closed && !stream.destroyed; i++) {
        sentAfter += mib.byteLength;
        if (!stream.write(mib)) {
          await new Promise<void>((resolve) => {
            const done = () => {
              stream.off("drain", done);
              stream.off("close", done);
              resolve();
            };
            stream.once("drain", done);
            stream.once("close", done);
          });
        }
      }
    })();
  });
}

/** What a client that resets every call answered before it sent all of it saw on its connection. */
interface ResettingRun {
  /** Each call's grpc-status, or the error it failed with. */
  readonly answers: Map<string, number>;
  /** The error code of every GOAWAY the connection received. */
  readonly goaways: number[];
  /** Calls the client reset because their answer came before it had sent all of the request. */
  readonly resets: number;
}

/**
 * offloadsLikeCCore makes `calls` offloads over max_blob_bytes on one HTTP/2 connection, `workers`
 * at a time, the way gRPC C-core (grpcio, the Python SDK) does: the header, then the payload
 * in 1 MiB messages written as the application hands them over, and once the answer is in, a
 * reset (RST_STREAM NO_ERROR) of a stream whose request it had not all sent yet.
 */
async function offloadsLikeCCore(url: string, calls: number): Promise<ResettingRun> {
  // Node counts a client's unsent writes against its session memory (10 MB by default) and
  // resets, with ENHANCE_YOUR_CALM, a stream whose trailers arrive while it is over: on a loaded
  // machine the 24 MiB these workers may queue did that to a call now and then. C-core has no
  // such limit, so this client holds what it queues.
  const session = http2.connect(url, { maxSessionMemory: 64 });
  const goaways: number[] = [];
  session.on("goaway", (code) => goaways.push(code));
  session.on("error", () => {});
  const answers = new Map<string, number>();
  const note = (answer: string) => answers.set(answer, (answers.get(answer) ?? 0) + 1);
  let resets = 0;
  const chunk = offloadEnvelope({
    msg: { case: "chunk", value: new Uint8Array(1024 * 1024 - 16) },
  });
  const offload = (callId: string) =>
    new Promise<void>((resolve) => {
      let status: string | undefined;
      let stream: http2.ClientHttp2Stream;
      try {
        stream = openGrpcStream(session, "Offload");
      } catch (err) {
        note(`not sent: ${(err as Error).message}`);
        resolve();
        return;
      }
      let sentAll = false;
      stream.on("trailers", (h) => {
        status = `grpc-status ${h["grpc-status"]}`;
        // The call is over: C-core resets a stream it has not sent all of yet.
        if (!sentAll && !stream.closed) {
          resets++;
          stream.close(http2.constants.NGHTTP2_NO_ERROR);
        }
      });
      stream.on("data", () => {});
      stream.on("error", () => {});
      stream.on("close", () => {
        note(status ?? `closed, rst ${stream.rstCode}`);
        resolve();
      });
      stream.write(
        offloadEnvelope({
          msg: {
            case: "header",
            value: { key: { tenant: "dev", runId: "r", callId }, expectedSize: 3n << 20n },
          },
        }),
      );
      void (async () => {
        for (let i = 0; i < 3; i++) {
          await new Promise((r) => setTimeout(r, 10));
          if (stream.closed || stream.destroyed) return;
          stream.write(chunk);
        }
        if (stream.closed || stream.destroyed) return;
        sentAll = true;
        stream.end();
      })();
    });
  let next = 0;
  const worker = async () => {
    while (next < calls) await offload(`cc${next++}`);
  };
  await Promise.all(Array.from({ length: workers }, worker));
  session.close();
  return { answers, goaways, resets };
}

/**
 * A client refused over and over keeps being served on its connection. Each refused offload is
 * answered while the client is still sending its payload. A client that reset each such stream
 * used up the resets nghttp2 allows one connection (1,000 at once, 33 a second after), which
 * then hung; a stream the client ended instead, closed while the server held its unread bytes
 * paused, was never freed, and at 1,000 of them Node refused every new call on the connection
 * with ENHANCE_YOUR_CALM.
 */
describe("refused calls", () => {
  let server: SpillwayServer;
  beforeAll(async () => {
    server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      limits: { maxBlobBytes },
    });
  });
  afterAll(() => server.close(1000));

  it.each([
    ["refused at its header (size announced)", () => Buffer.alloc(3 * maxBlobBytes, 0x61)],
    ["refused part way (size not announced)", () => chunks(3 * maxBlobBytes)],
  ])(
    "answers every offload %s, and the next call succeeds",
    async (_, data) => {
      const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
      const answers = new Map<string, number>();
      let next = 0;
      const worker = async () => {
        while (next < refusals) {
          const callId = `c${next++}`;
          try {
            await spillway.offload({ tenant: "dev", runId: "r", callId }, data(), undefined, {
              timeoutMs: 20_000,
            });
            answers.set("stored", (answers.get("stored") ?? 0) + 1);
          } catch (err) {
            const { code, rawMessage } = ConnectError.from(err);
            const answer = `${Code[code]}: ${rawMessage.replace(/\d+/g, "N")}`;
            answers.set(answer, (answers.get(answer) ?? 0) + 1);
          }
        }
      };
      await Promise.all(Array.from({ length: workers }, worker));

      expect([...answers]).toEqual([
        [expect.stringMatching(/^ResourceExhausted: .*exceeds max_blob_bytes N$/), refusals],
      ]);
      const kept = await spillway.offload({ tenant: "dev", runId: "r", callId: "after" }, "kept\n");
      expect(kept.sha256).toBe(sha256("kept\n"));
    },
    120_000,
  );

  it("keeps a C-core client refused in bulk under nghttp2's reset limit, losing no call", async () => {
    const run = await offloadsLikeCCore(server.url, refusals);
    // Answered while the client still sent, every call was reset by the client; past 1,000
    // resets nghttp2 sent GOAWAY(INTERNAL_ERROR) and the calls crossing it were lost. Past its
    // early answers (500 at once, 33 a second after), the connection's calls are answered
    // once their request has ended, with nothing left to reset.
    expect(run.goaways).toEqual([]);
    expect(run.resets).toBeGreaterThan(0);
    expect(run.resets).toBeLessThan(1000);
    expect([...run.answers]).toEqual([[`grpc-status ${Code.ResourceExhausted}`, refusals]]);
  }, 120_000);

  it("resets, with NO_ERROR, an answered stream its client keeps open, after 5 s", async () => {
    const held = await offloadHeldOpen(server.url, 0);
    expect(held.status).toBe(Code.ResourceExhausted);
    expect(held.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
  }, 30_000);

  it("resets, with NO_ERROR, an answered stream its client goes on filling, past 16 MiB", async () => {
    const held = await offloadHeldOpen(server.url, 256);
    expect(held.status).toBe(Code.ResourceExhausted);
    expect(held.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    // Cut off well before the 256 MiB: the 16 MiB read after the answer, and no more than the
    // 32 MiB connection window in flight.
    expect(held.sentAfter).toBeLessThan(64 * 1024 * 1024);
  }, 30_000);
});
