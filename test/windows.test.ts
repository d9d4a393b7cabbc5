import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import type { ReadToolOutputInit } from "@spillway/client";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

/**
 * Windows over the wire, on a payload big enough to span many line-index strides and to be
 * stored as a blob, so every window goes through ranged backend reads.
 */
describe.each(serviceBackends)("ReadToolOutput windows over the wire  (%s)", (backendKind) => {
  let t: TestServer;
  const total = 30_000;
  // Several bytes-mode frames, the last one short.
  const big = randomBytes(2 * 1024 * 1024 + 12_345);
  const lineText = (n: number) => `entry ${n} ${n % 997 === 0 ? "NEEDLE" : "hay"}`;
  const read = (window: Omit<ReadToolOutputInit, "runId" | "handle">) =>
    t.sdk().readToolOutput({ runId: "w", handle: "res_log", ...window });

  beforeAll(async () => {
    t = await startTestServer({ backend: backendKind, limits: { indexStride: 64 } });
    const text = Array.from({ length: total }, (_, i) => lineText(i + 1)).join("\r\n");
    await t.sdk().offload({ tenant: "dev", runId: "w", callId: "log" }, text, {
      contentType: "text/plain",
    });
    await t
      .sdk()
      .offload({ tenant: "dev", runId: "w", callId: "wide" }, `${"é".repeat(5000)}\nnext\n`);
    await t.sdk().offload({ tenant: "dev", runId: "w", callId: "bin" }, randomBytes(70_000));
    await t.sdk().offload({ tenant: "dev", runId: "w", callId: "big" }, big);
    await t.sdk().offload(
      { tenant: "dev", runId: "w", callId: "json" },
      { json: { id: 7, items: [1, 2, 3] } },
      {
        contentType: "application/json",
      },
    );
  });
  afterAll(() => t.stop());

  it("returns a deep window with cat -n numbering, CR removed, and the next offset", async () => {
    const w = await read({ window: { case: "lines", value: { offset: 20_000n, limit: 3 } } });
    expect(w.header?.totalLines).toBe(BigInt(total));
    expect(w.rendered).toContain(` 20001\t${lineText(20_001)}\n`);
    expect(w.rendered).toContain(` 20003\t${lineText(20_003)}\n`);
    expect(w.rendered).not.toContain("\r");
    expect(w.trailer?.nextOffset).toBe(20_003n);
  });

  it("returns the tail with from_end", async () => {
    const w = await read({
      window: { case: "lines", value: { offset: 0n, limit: 2, fromEnd: true } },
    });
    expect(w.rendered).toContain(` 29999\t${lineText(29_999)}\n`);
    expect(w.rendered).toContain(` 30000\t${lineText(30_000)}\n`);
    expect(w.trailer?.eof).toBe(true);
  });

  it("caps a window at 1,000 lines whatever the client asks", async () => {
    const w = await read({ window: { case: "lines", value: { offset: 0n, limit: 5000 } } });
    expect(w.trailer?.returnedLines).toBe(1000n);
    expect(w.trailer?.nextOffset).toBe(1000n);
  });

  it("returns an empty window, not an error, past the end", async () => {
    const w = await read({ window: { case: "lines", value: { offset: 10_000_000n } } });
    expect(w.trailer?.returnedLines).toBe(0n);
    expect(w.trailer?.eof).toBe(true);
    expect(w.rendered).toContain("no lines at offset 10000000");
  });

  it("clips a long line at 2,000 characters with a visible marker, never splitting a character", async () => {
    const w = await t.sdk().readToolOutput({ runId: "w", handle: "res_wide" });
    expect(w.rendered).toContain("é".repeat(2000));
    expect(w.rendered).not.toContain("é".repeat(2001));
    expect(w.rendered).toContain("line clipped at 2000 chars");
    expect(w.rendered).not.toContain("\uFFFD");
    expect(w.trailer?.clipped).toBe(true);
    expect(w.rendered).toContain("     2\tnext\n");
  });

  it("finds literal and RE2 matches with grep -n numbering", async () => {
    const lit = await read({ window: { case: "search", value: { pattern: "NEEDLE" } } });
    expect(lit.trailer?.totalMatches).toBe(BigInt(Math.floor(total / 997)));
    expect(lit.rendered).toContain(`   997:\t${lineText(997)}`);
    const re = await read({
      window: {
        case: "search",
        value: { pattern: "^entry 2999[0-9] ", regex: true, maxMatches: 3 },
      },
    });
    expect(re.trailer?.returnedMatches).toBe(3n);
    expect(re.trailer?.nextOffset).toBe(3n);
  });

  it("numbers deep matches and their context exactly when it skips ahead through the stored index", async () => {
    const last = 997 * Math.floor(total / 997);
    const lit = await read({
      window: { case: "search", value: { pattern: "NEEDLE", skip: 29n, contextLines: 2 } },
    });
    expect(lit.rendered).toContain(
      [last - 2, last - 1].map((n) => ` ${n}-\t${lineText(n)}\n`).join("") +
        ` ${last}:\t${lineText(last)}\n` +
        [last + 1, last + 2].map((n) => ` ${n}-\t${lineText(n)}\n`).join(""),
    );
    const re = await read({
      window: {
        case: "search",
        value: { pattern: "[0-9]+ needle", regex: true, ignoreCase: true },
      },
    });
    expect(re.trailer?.totalMatches).toBe(BigInt(Math.floor(total / 997)));
    expect(re.rendered).toContain(` ${last}:\t${lineText(last)}\n`);
  });

  it("answers a ReDoS pattern promptly and refuses backtracking-only syntax", async () => {
    const w = await read({ window: { case: "search", value: { pattern: "(a+)+$", regex: true } } });
    expect(w.trailer?.totalMatches).toBe(0n);
    const err = await read({
      window: { case: "search", value: { pattern: "(a)\\1", regex: true } },
    }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
  });

  it("reports binary payloads in lines mode and serves them in bytes mode", async () => {
    const w = await t.sdk().readToolOutput({ runId: "w", handle: "res_bin" });
    expect(w.header?.binary).toBe(true);
    expect(w.rendered).toContain("binary output (70000 bytes");
    const b = await t.sdk().readToolOutput({
      runId: "w",
      handle: "res_bin",
      window: { case: "bytes", value: { offset: 69_990n } },
    });
    expect(b.trailer?.returnedBytes).toBe(10n);
    expect(b.rendered).toMatch(/^\[res_bin\] bytes 69990-70000 of 70000\n/);
  });

  it("previews JSON with its shape", async () => {
    const s = await t.sdk().raw.statToolOutput({ runId: "w", handle: "res_json" });
    expect(s.attachment?.preview?.shape).toContain("id: number");
    expect(s.attachment?.preview?.shape).toContain("[3 items");
  });

  it("renders the same window to the same bytes every time", async () => {
    const a = await read({ window: { case: "lines", value: { offset: 123n, limit: 50 } } });
    const b = await read({ window: { case: "lines", value: { offset: 123n, limit: 50 } } });
    expect(a.rendered).toBe(b.rendered);
  });

  it("serves the same window over the Connect and gRPC-Web protocols", async () => {
    const grpc = await read({ window: { case: "lines", value: { offset: 5n, limit: 5 } } });
    for (const transport of [
      createConnectTransport({ baseUrl: t.url, httpVersion: "2" }),
      createGrpcWebTransport({ baseUrl: t.url, httpVersion: "2" }),
    ]) {
      let rendered = "";
      for await (const frame of createClient(SpillwayService, transport).readToolOutput({
        runId: "w",
        handle: "res_log",
        window: { case: "lines", value: { offset: 5n, limit: 5 } },
      })) {
        if (frame.frame.case === "trailer") rendered = frame.frame.value.rendered;
      }
      expect(rendered).toBe(grpc.rendered);
    }
  });

  it("sends the same bytes-mode frames over gRPC, Connect and gRPC-Web", async () => {
    // gRPC writes data frames without re-encoding them (server/src/grpc-node-handler.ts); the
    // other protocols encode them through protobuf-es. Clients must not tell the difference.
    const bytesWindow = {
      runId: "w",
      handle: "res_big",
      window: { case: "bytes", value: { offset: 0n } },
      omitRendered: true,
    } as const;
    const collect = async (transport: Parameters<typeof createClient>[1]) => {
      const frames: Uint8Array[] = [];
      let eof = false;
      for await (const frame of createClient(SpillwayService, transport).readToolOutput(
        bytesWindow,
      )) {
        if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
          frames.push(frame.frame.value.body.value);
        }
        if (frame.frame.case === "trailer") eof = frame.frame.value.eof;
      }
      return { frames, eof };
    };
    const grpc = await t.sdk().readToolOutput(bytesWindow);
    const grpcFrames = grpc.frames.flatMap((f) =>
      f.frame.case === "content" && f.frame.value.body.case === "data"
        ? [f.frame.value.body.value]
        : [],
    );
    // Frames follow the backend's chunks, up to 1 MiB each.
    expect(Math.max(...grpcFrames.map((f) => f.byteLength))).toBeLessThanOrEqual(1024 * 1024);
    expect(Buffer.concat(grpcFrames).equals(big)).toBe(true);
    for (const transport of [
      createConnectTransport({ baseUrl: t.url, httpVersion: "2" }),
      createGrpcWebTransport({ baseUrl: t.url, httpVersion: "2" }),
    ]) {
      const other = await collect(transport);
      expect(other.eof).toBe(true);
      expect(Buffer.concat(other.frames).equals(big)).toBe(true);
    }
  });
});
