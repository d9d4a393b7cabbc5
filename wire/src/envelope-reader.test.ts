import { toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { ReadToolOutputResponseSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { codeThrownBy } from "../../test/support/code-of.js";
import { dataFrame, dataFramePath } from "./data-frame.js";
import {
  type BytesFieldPiece,
  createEnvelopeReader,
  type TrailerFrame,
} from "./envelope-reader.js";

const message = (size: number, seed: number): Uint8Array => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + seed) & 0xff;
  return bytes;
};

const body = (messages: readonly Uint8Array[]): Buffer =>
  Buffer.concat(messages.map((m) => encodeEnvelope(0, m)));

describe("createEnvelopeReader", () => {
  const messages = [message(0, 1), message(1, 2), message(300, 3), message(4, 4), message(70, 5)];
  const wire = body(messages);

  it("returns every message whole wherever the body is split", () => {
    for (let cut = 0; cut <= wire.length; cut++) {
      for (const second of [cut, Math.min(wire.length, cut + 3)]) {
        const reader = createEnvelopeReader(1024);
        const got = [
          ...reader.push(wire.subarray(0, cut)),
          ...reader.push(wire.subarray(cut, second)),
          ...reader.push(wire.subarray(second)),
        ];
        expect(got.map((m) => Buffer.from(m).toString("hex"))).toEqual(
          messages.map((m) => Buffer.from(m).toString("hex")),
        );
        expect(reader.atBoundary).toBe(true);
      }
    }
  });

  it("returns every message when the body arrives a byte at a time", () => {
    const reader = createEnvelopeReader(1024);
    const got: Uint8Array[] = [];
    for (let i = 0; i < wire.length; i++) got.push(...reader.push(wire.subarray(i, i + 1)));
    expect(got.map((m) => Buffer.from(m).toString("hex"))).toEqual(
      messages.map((m) => Buffer.from(m).toString("hex")),
    );
  });

  it("hands out a message that arrived in one piece as a view of it, not a copy", () => {
    const piece = body([message(4096, 9)]);
    const [got] = createEnvelopeReader(8192).push(piece);
    expect(got?.buffer).toBe(piece.buffer);
    expect(got?.byteOffset).toBe(piece.byteOffset + 5);
  });

  it("is not at a boundary inside an envelope", () => {
    const reader = createEnvelopeReader(1024);
    reader.push(wire.subarray(0, 3));
    expect(reader.atBoundary).toBe(false);
    reader.push(wire.subarray(3, 5 + 0 + 5 + 1 - 1));
    expect(reader.atBoundary).toBe(false);
  });

  it("refuses a message over readMaxBytes from its header alone", () => {
    const header = body([message(2000, 1)]).subarray(0, 5);
    expect(codeThrownBy(() => createEnvelopeReader(1999).push(header))).toBe(
      Code.ResourceExhausted,
    );
    expect(createEnvelopeReader(2000).push(header)).toEqual([]);
  });

  it("refuses compressed and other flagged envelopes", () => {
    for (const flags of [0x01, 0x02, 0x80]) {
      const piece = Buffer.from(encodeEnvelope(flags, message(3, 1)));
      expect(codeThrownBy(() => createEnvelopeReader(1024).push(piece))).toBe(Code.Internal);
    }
  });

  describe("with a bytes field", () => {
    const data = message(3000, 7);
    const frame = toBinary(ReadToolOutputResponseSchema, dataFrame(data));
    // A small message before and after, and a large message that is not a data frame.
    const other = message(2500, 8);
    const stream = body([message(10, 1), frame, other, message(4, 2)]);
    const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

    /** Reads the stream cut at the given points; pieces of one field are joined again. */
    function read(cuts: readonly number[]) {
      const reader = createEnvelopeReader(8192, { bytesField: dataFramePath });
      const items: (Uint8Array | BytesFieldPiece)[] = [];
      let from = 0;
      for (const cut of [...cuts, stream.length]) {
        const piece = stream.subarray(from, cut);
        items.push(...reader.push(piece));
        from = cut;
      }
      expect(reader.atBoundary).toBe(true);
      return items;
    }

    // Where the frame's message begins, after its envelope header.
    const frameStart = 5 + 10 + 5;

    it("hands out a data frame spread over pieces as views of them, and the rest whole", () => {
      // The first cut splits the frame's envelope header; the next ones fall inside its data.
      for (let cut = frameStart + 20; cut < frameStart + frame.length; cut += 97) {
        const items = read([frameStart - 3, cut, Math.min(cut + 500, stream.length)]);
        const pieces = items.filter(
          (item): item is BytesFieldPiece => !(item instanceof Uint8Array),
        );
        const whole = items.filter((item): item is Uint8Array => item instanceof Uint8Array);
        // Pieces come in order, in place of the frame, and are the field's data.
        expect(items.findIndex((item) => !(item instanceof Uint8Array))).toBe(1);
        expect(pieces.length).toBeGreaterThan(1);
        expect(hex(Buffer.concat(pieces.map((p) => p.piece)))).toBe(hex(data));
        for (const p of pieces) expect(p.piece.buffer).toBe(stream.buffer);
        expect(whole.map(hex)).toEqual([message(10, 1), other, message(4, 2)].map(hex));
      }
    });

    it("assembles a data frame whose prefix is cut, and returns it whole", () => {
      const prefix = frame.length - data.length;
      // The piece with the frame's envelope header ends before its data begins.
      for (let cut = frameStart; cut < frameStart + prefix; cut++) {
        const items = read([cut, frameStart + 200]);
        expect(items.every((item) => item instanceof Uint8Array)).toBe(true);
        expect(items.map((item) => hex(item as Uint8Array))).toEqual(
          [message(10, 1), frame, other, message(4, 2)].map(hex),
        );
      }
    });

    it("is not at a boundary while pieces of a field are still to come", () => {
      const reader = createEnvelopeReader(8192, { bytesField: dataFramePath });
      const frameEnd = 5 + 10 + 5 + frame.length;
      reader.push(stream.subarray(0, frameEnd - 1));
      expect(reader.atBoundary).toBe(false);
      const last = reader.push(stream.subarray(frameEnd - 1, frameEnd));
      expect(last).toHaveLength(1);
      expect(hex((last[0] as BytesFieldPiece).piece)).toBe(hex(data.subarray(-1)));
      expect(reader.atBoundary).toBe(true);
    });
  });

  describe("with a trailer flag", () => {
    const data = message(3000, 7);
    const frame = toBinary(ReadToolOutputResponseSchema, dataFrame(data));
    const trailer = Buffer.from("grpc-status: 0\r\ngrpc-message: \r\n");
    const stream = Buffer.concat([
      encodeEnvelope(0, message(10, 1)),
      encodeEnvelope(0, frame),
      encodeEnvelope(0x80, trailer),
    ]);
    const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
    /** What came out, as text: messages by their hex, trailer frames by their lines. */
    const shown = (items: readonly (Uint8Array | BytesFieldPiece | TrailerFrame)[]) =>
      items.map((item) =>
        item instanceof Uint8Array
          ? `message ${hex(item)}`
          : "piece" in item
            ? `piece ${hex(item.piece)}`
            : `trailer ${Buffer.from(item.trailer).toString()}`,
      );

    it("hands out a trailer frame whole wherever the body is split, its data never as pieces", () => {
      // A trailer frame laid out like a data frame, cut inside: it is not the bytes field.
      const lookalike = Buffer.from(encodeEnvelope(0x80, frame));
      const reader = createEnvelopeReader(8192, { bytesField: dataFramePath, trailerFlag: 0x80 });
      const parts = [
        ...reader.push(lookalike.subarray(0, 100)),
        ...reader.push(lookalike.subarray(100)),
      ];
      expect(parts.map((item) => ("trailer" in item ? hex(item.trailer) : "other"))).toEqual([
        hex(frame),
      ]);
      for (let cut = 0; cut <= stream.length; cut++) {
        const reader = createEnvelopeReader(8192, { trailerFlag: 0x80 });
        const got = [...reader.push(stream.subarray(0, cut)), ...reader.push(stream.subarray(cut))];
        expect(shown(got)).toEqual([
          `message ${hex(message(10, 1))}`,
          `message ${hex(frame)}`,
          `trailer ${trailer.toString()}`,
        ]);
        expect(reader.atBoundary).toBe(true);
      }
    });

    it("still refuses a compressed envelope, and a trailer over readMaxBytes", () => {
      const compressed = Buffer.from(encodeEnvelope(0x01, message(3, 1)));
      expect(
        codeThrownBy(() => createEnvelopeReader(1024, { trailerFlag: 0x80 }).push(compressed)),
      ).toBe(Code.Internal);
      const big = Buffer.from(encodeEnvelope(0x80, message(2000, 1)));
      expect(codeThrownBy(() => createEnvelopeReader(1999, { trailerFlag: 0x80 }).push(big))).toBe(
        Code.ResourceExhausted,
      );
    });
  });
});
