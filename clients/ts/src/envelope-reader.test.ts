import { Code, ConnectError } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { describe, expect, it } from "vitest";
import { createEnvelopeReader } from "./envelope-reader.js";

const message = (size: number, seed: number): Uint8Array => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + seed) & 0xff;
  return bytes;
};

const body = (messages: readonly Uint8Array[]): Buffer =>
  Buffer.concat(messages.map((m) => encodeEnvelope(0, m)));

function codeOf(fn: () => unknown): Code | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof ConnectError ? err.code : undefined;
  }
}

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
    expect(codeOf(() => createEnvelopeReader(1999).push(header))).toBe(Code.ResourceExhausted);
    expect(createEnvelopeReader(2000).push(header)).toEqual([]);
  });

  it("refuses compressed and other flagged envelopes", () => {
    for (const flags of [0x01, 0x02, 0x80]) {
      const piece = Buffer.from(encodeEnvelope(flags, message(3, 1)));
      expect(codeOf(() => createEnvelopeReader(1024).push(piece))).toBe(Code.Internal);
    }
  });
});
