import { randomBytes } from "node:crypto";
import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failureOf } from "./support/code-of.js";
import { offloadEnvelope, openGrpcStream } from "./support/raw-grpc.js";
import { readBack, sha256 } from "./support/read-back.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const KiB = 1024;
const MiB = 1024 * KiB;
/** What one Offload reserves with default limits: a 4 MiB chunk and the 16 KiB inline head. */
const offloadWeight = 4 * MiB + 16 * KiB;
/** What one ReadToolOutput reserves: its largest frame. */
const readWeight = MiB;
/** The default share of one tenant with a token file: a quarter of the default 1 GiB. */
const share = 256 * MiB;

/** A stream's gRPC status and message, once the server answered it. */
interface Answer {
  readonly status: number;
  readonly message: string;
}

/** Resolves with the stream's status when the server answers it; never, while it holds it. */
function answerOf(stream: http2.ClientHttp2Stream): Promise<Answer> {
  return new Promise((resolve) => {
    const done = (headers: http2.IncomingHttpHeaders) => {
      const status = headers["grpc-status"];
      if (status === undefined) return;
      const message = headers["grpc-message"];
      resolve({
        status: Number(status),
        message: typeof message === "string" ? decodeURIComponent(message) : "",
      });
    };
    stream.on("response", done);
    stream.on("trailers", done);
    stream.on("error", () => {});
    stream.resume();
  });
}

/** Resolves once count of the answers have come in, with those answers. */
async function firstAnswers(answers: Promise<Answer>[], count: number): Promise<Answer[]> {
  const got: Answer[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`only ${got.length} of ${count} streams were answered`)),
      20_000,
    );
    for (const answer of answers) {
      void answer.then((a) => {
        got.push(a);
        if (got.length === count) {
          clearTimeout(timer);
          resolve();
        }
      });
    }
  });
  return got;
}

describe("one tenant cannot starve the others (default limits, two token-file tenants)", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory", tokens: { a: "tenant-a", b: "tenant-b" } });
  });
  afterAll(() => t.stop());

  it("serves tenant B's offloads and reads while tenant A holds all it may, refusing A past its share", async () => {
    const bytes = randomBytes(3 * MiB);
    await t.sdk("a").offload({ tenant: "tenant-a", runId: "r", callId: "kept" }, "kept\n");
    await t.sdk("b").offload({ tenant: "tenant-b", runId: "r", callId: "before" }, bytes);
    const session = http2.connect(t.url);
    try {
      const auth = { authorization: "Bearer a" };
      // 256 header-only offloads, every call slot A has: their reservations would fill the
      // server's 1 GiB whole.
      const offloads = Array.from({ length: 256 }, (_, i) => {
        const stream = openGrpcStream(session, "Offload", auth);
        stream.write(
          offloadEnvelope({
            msg: {
              case: "header",
              value: { key: { tenant: "tenant-a", runId: "r", callId: `held-${i}` } },
            },
          }),
        );
        return answerOf(stream);
      });
      const admitted = Math.floor(share / offloadWeight);
      const refusedOffloads = await firstAnswers(offloads, 256 - admitted);
      expect(refusedOffloads.every((a) => a.status === Code.ResourceExhausted)).toBe(true);
      expect(refusedOffloads[0]?.message).toBe(
        `tenant "tenant-a" holds ${admitted * offloadWeight} of its max_inflight_bytes_per_tenant ${share} in calls in flight on this server; an Offload needs ${offloadWeight} more; retry shortly`,
      );

      // And then reads, whose requests never come: A's share has room for three more.
      const left = share - admitted * offloadWeight;
      const reads = Array.from({ length: 50 }, () =>
        answerOf(openGrpcStream(session, "ReadToolOutput", auth)),
      );
      const refusedReads = await firstAnswers(reads, 50 - Math.floor(left / readWeight));
      expect(refusedReads.every((a) => a.status === Code.ResourceExhausted)).toBe(true);
      expect(refusedReads[0]?.message).toContain("max_inflight_bytes_per_tenant");

      // A is refused by its own share, by name, through the SDK too.
      const refused = await failureOf(
        t.sdk("a").offload({ tenant: "tenant-a", runId: "r", callId: "more" }, "more\n"),
      );
      expect(refused.code).toBe(Code.ResourceExhausted);
      expect(refused.rawMessage).toContain("max_inflight_bytes_per_tenant");
      // Calls that hold no payload still go through for A.
      expect((await t.sdk("a").stat("r", "res_kept")).sizeBytes).toBe(5n);

      // B offloads and reads as usual, many at once.
      const payloads = Array.from({ length: 8 }, () => randomBytes(2 * MiB));
      await Promise.all(
        payloads.map((p, i) =>
          t.sdk("b").offload({ tenant: "tenant-b", runId: "r", callId: `b-${i}` }, p),
        ),
      );
      const readBackB = await Promise.all([
        readBack(t.sdk("b"), "r", "res_before"),
        ...payloads.map((_, i) => readBack(t.sdk("b"), "r", `res_b-${i}`)),
      ]);
      expect(readBackB.map(sha256)).toEqual([bytes, ...payloads].map(sha256));
      const info = await t.raw("b").getServerInfo({});
      expect(info.limits?.maxInflightBytesPerTenant).toBe(BigInt(share));
    } finally {
      session.destroy();
    }
    // Once A's streams are gone, A offloads again.
    let again: ConnectError | undefined;
    for (let i = 0; i < 100; i++) {
      again = await t
        .sdk("a")
        .offload({ tenant: "tenant-a", runId: "r", callId: "after" }, "after\n")
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      if (again === undefined) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(again).toBeUndefined();
  });
});
