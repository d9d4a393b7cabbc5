import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { boundFrames } from "./reply-frames.js";

const frame = (init: Parameters<typeof create<typeof ReadToolOutputResponseSchema>>[1]) =>
  create(ReadToolOutputResponseSchema, init);

const line = (n: number, text: string) => ({
  number: BigInt(n),
  text,
  byteOffset: BigInt(n * 100),
});

async function collect(frames: ReadToolOutputResponse[], bytes: number) {
  const out: ReadToolOutputResponse[] = [];
  for await (const f of boundFrames(
    (async function* () {
      yield* frames;
    })(),
    bytes,
  )) {
    out.push(f);
  }
  return out;
}

/** The elements of every content frame, in order, whatever frames they came in. */
function elements(frames: ReadToolOutputResponse[]): unknown[] {
  return frames.flatMap((f): unknown[] => {
    if (f.frame.case !== "content") return [];
    const body = f.frame.value.body;
    if (body.case === "lines") return body.value.lines;
    if (body.case === "matches") return body.value.matches;
    if (body.case === "nodes") return body.value.nodes;
    if (body.case === "data") return [...body.value];
    return [];
  });
}

describe("boundFrames", () => {
  const header = frame({ frame: { case: "header", value: { handle: "res_x" } } });
  const trailer = frame({ frame: { case: "trailer", value: { rendered: "x".repeat(5000) } } });

  it("passes frames that fit as they are, and the header and trailer whatever their size", async () => {
    const small = frame({
      frame: {
        case: "content",
        value: { body: { case: "lines", value: { lines: [line(1, "a")] } } },
      },
    });
    const out = await collect([header, small, trailer], 1000);
    expect(out).toHaveLength(3);
    expect(out[0]).toBe(header);
    expect(out[1]).toBe(small);
    expect(out[2]).toBe(trailer);
  });

  it("splits lines, matches, nodes and data into frames that each fit, keeping every element in order", async () => {
    const lines = Array.from({ length: 40 }, (_, i) => line(i + 1, "é".repeat(30 + i)));
    const matches = Array.from({ length: 12 }, (_, i) => ({
      line: line(i + 1, "m".repeat(50)),
      before: lines.slice(i, i + 2),
      after: lines.slice(i + 2, i + 4),
    }));
    const nodes = Array.from({ length: 30 }, (_, i) => ({
      path: `$['k${i}']`,
      value: "v".repeat(60),
      byteOffset: BigInt(i),
      byteLength: 60n,
    }));
    const data = new Uint8Array(5000).map((_, i) => i % 251);
    const frames = [
      header,
      frame({
        frame: { case: "content", value: { body: { case: "lines", value: { lines } } } },
      }),
      frame({
        frame: { case: "content", value: { body: { case: "matches", value: { matches } } } },
      }),
      frame({
        frame: { case: "content", value: { body: { case: "nodes", value: { nodes } } } },
      }),
      frame({ frame: { case: "content", value: { body: { case: "data", value: data } } } }),
      trailer,
    ];
    const out = await collect(frames, 1000);
    expect(out.length).toBeGreaterThan(frames.length + 10);
    for (const f of out.slice(1, -1)) {
      expect(toBinary(ReadToolOutputResponseSchema, f).byteLength).toBeLessThanOrEqual(1000);
    }
    expect(elements(out)).toEqual(elements(frames));
    expect(out.map((f) => f.frame.case)).toEqual([
      "header",
      ...out.slice(1, -1).map(() => "content"),
      "trailer",
    ]);
  });

  it("refuses an element that alone passes the bound rather than split it", async () => {
    const node = { path: `$['${"k".repeat(3000)}']`, value: "1", byteOffset: 7n, byteLength: 1n };
    const big = frame({
      frame: { case: "content", value: { body: { case: "nodes", value: { nodes: [node] } } } },
    });
    const err = await collect([header, big], 1000).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    if (!(err instanceof ConnectError)) return;
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.rawMessage).toContain("bytes mode: offset=7, limit=1");
  });
});
