import { describe, expect, it } from "vitest";
import { createTextSniffer } from "./text-sniffer.js";

function sniff(chunks: Uint8Array[]): boolean {
  const sniffer = createTextSniffer();
  for (const chunk of chunks) sniffer.push(chunk);
  return sniffer.finish().binary;
}

/** Every way worth testing to cut `bytes`: whole, 1-byte pieces, 2/3/5/7-byte pieces. */
function chunkings(bytes: Uint8Array): Uint8Array[][] {
  const out: Uint8Array[][] = [[bytes]];
  for (const size of [1, 2, 3, 5, 7]) {
    const pieces: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.slice(i, i + size));
    out.push(pieces);
  }
  return out;
}

const utf8 = (text: string) => new TextEncoder().encode(text);

describe("createTextSniffer", () => {
  it("reports UTF-8 text as text, however it is chunked", () => {
    const text = utf8("plain ascii\r\nété 中文 😀 e\u0301 \u2028 end");
    for (const chunks of chunkings(text)) expect(sniff(chunks)).toBe(false);
  });

  it("reports an empty payload as text", () => {
    expect(sniff([])).toBe(false);
    expect(sniff([new Uint8Array(0)])).toBe(false);
  });

  it("reports a NUL byte as binary", () => {
    const bytes = utf8("abc\u0000def");
    for (const chunks of chunkings(bytes)) expect(sniff(chunks)).toBe(true);
  });

  it("reports invalid UTF-8 as binary", () => {
    const cases = [
      [0x61, 0xff, 0x62],
      [0xc0, 0x80], // overlong NUL
      [0xed, 0xa0, 0x80], // UTF-16 surrogate
      [0xe2, 0x41, 0x42], // lead byte followed by ASCII
      [0x80, 0x61], // stray continuation byte
      [0xf4, 0x90, 0x80, 0x80], // beyond U+10FFFF
    ];
    for (const bytes of cases) {
      for (const chunks of chunkings(Uint8Array.from(bytes))) expect(sniff(chunks)).toBe(true);
    }
  });

  it("reports a payload that ends inside a multi-byte sequence as binary", () => {
    for (const bytes of [[0x61, 0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc3]]) {
      for (const chunks of chunkings(Uint8Array.from(bytes))) expect(sniff(chunks)).toBe(true);
    }
  });

  it("accepts a 4-byte character split one byte per chunk", () => {
    expect(sniff([[0xf0], [0x9f], [0x98], [0x80]].map((b) => Uint8Array.from(b)))).toBe(false);
  });

  it("stays binary once binary", () => {
    const sniffer = createTextSniffer();
    sniffer.push(Uint8Array.from([0xff]));
    sniffer.push(utf8("perfectly fine text"));
    expect(sniffer.finish().binary).toBe(true);
  });

  it("keeps its own copy of a carried partial sequence", () => {
    const sniffer = createTextSniffer();
    const chunk = Uint8Array.from([0x41, 0xe2]);
    sniffer.push(chunk);
    chunk.fill(0xc3); // would turn a shared view into a different, valid lead byte
    sniffer.push(Uint8Array.from([0x82, 0xac])); // completes "€"
    expect(sniffer.finish().binary).toBe(false);
  });
});
