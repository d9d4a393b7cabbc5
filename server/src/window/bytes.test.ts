import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  ReadToolOutputRequestSchema,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import { dataFrameBytes } from "./bytes.js";
import { countChars, createWindowCaps, defaultWindowCaps, type WindowCaps } from "./caps.js";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

interface BytesResult {
  start: number;
  data: Buffer;
  frameSizes: number[];
  trailer: WindowTrailer;
}

/** Reads a bytes window. */
async function readBytes(
  source: WindowSource,
  offset: number,
  limit?: number,
  caps: WindowCaps = defaultWindowCaps,
): Promise<BytesResult> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "run",
    handle: source.handle,
    window: {
      case: "bytes",
      value: { offset: BigInt(offset), limit: limit === undefined ? undefined : BigInt(limit) },
    },
  });
  const parts: Uint8Array[] = [];
  const out: BytesResult = {
    start: -1,
    data: Buffer.alloc(0),
    frameSizes: [],
    trailer: undefined as never,
  };
  for await (const frame of readWindow(source, request, caps)) {
    if (frame.frame.case === "header") out.start = Number(frame.frame.value.start);
    if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
      parts.push(frame.frame.value.body.value);
      out.frameSizes.push(frame.frame.value.body.value.length);
    }
    if (frame.frame.case === "trailer") out.trailer = frame.frame.value;
  }
  out.data = Buffer.concat(parts);
  return out;
}

describe("bytes window over text", () => {
  const text = "héllo wörld\nsecond line\n";
  const bytes = Buffer.from(text);
  const source = createBufferWindowSource("res_t", "text/plain", bytes, false);

  it("returns the raw slice and renders it as text", async () => {
    const window = await readBytes(source, 0, 6);
    expect(window.data).toEqual(bytes.subarray(0, 6));
    expect(window.trailer.returnedBytes).toBe(6n);
    expect(window.trailer.nextOffset).toBe(6n);
    expect(window.trailer.eof).toBe(false);
    expect(window.trailer.rendered).toBe(
      "[res_t] bytes 0-6 of 26\nhéllo\n[more: bytes offset=6]\n",
    );
  });

  it("drops characters cut at either edge instead of replacing them", async () => {
    // Byte 2 is the tail of "é" and byte 8 the lead of "ö": both characters are cut.
    const window = await readBytes(source, 2, 7);
    expect(window.data).toEqual(bytes.subarray(2, 9));
    expect(window.trailer.rendered).toBe(
      "[res_t] bytes 2-9 of 26\nllo w\n[more: bytes offset=8]\n",
    );
    expect(window.trailer.rendered).not.toContain("\uFFFD");
    expect(window.trailer.nextOffset).toBe(9n);
  });

  it("ends with [end of output] at the end of the payload", async () => {
    const window = await readBytes(source, 14);
    expect(window.trailer.eof).toBe(true);
    expect(window.trailer.nextOffset).toBeUndefined();
    expect(window.trailer.rendered).toBe(
      "[res_t] bytes 14-26 of 26\nsecond line\n\n[end of output]\n",
    );
  });

  it("returns an empty window past the end", async () => {
    const window = await readBytes(source, 26);
    expect(window.data.length).toBe(0);
    expect(window.trailer.eof).toBe(true);
    expect(window.trailer.rendered).toBe(
      "[res_t] no bytes at offset 26: the output has 26 bytes\n",
    );
  });

  it("clips the rendering at maxWindowChars but returns every byte", async () => {
    const big = Buffer.from("ab€".repeat(300_000));
    const wide = createBufferWindowSource("res_big", "text/plain", big, false);
    const window = await readBytes(wide, 1);
    expect(window.data.equals(big.subarray(1))).toBe(true);
    expect(window.frameSizes.length).toBeGreaterThan(1);
    expect(window.frameSizes.every((size) => size <= dataFrameBytes)).toBe(true);
    const rendered = window.trailer.rendered;
    expect(countChars(rendered)).toBeLessThanOrEqual(50_000);
    expect(window.trailer.clipped).toBe(true);
    const match = /\[rendering clipped at 50000 chars; more: bytes offset=(\d+)\]\n$/.exec(
      rendered,
    );
    expect(match).not.toBeNull();
    const next = Number(match?.[1]);
    const body = rendered.slice(rendered.indexOf("\n") + 1, rendered.lastIndexOf("\n["));
    expect(Buffer.from(body).equals(big.subarray(1, next))).toBe(true);
  });

  it("caps the window at maxBytesWindow", async () => {
    const caps = createWindowCaps({ maxBytesWindow: 10 });
    const window = await readBytes(source, 0, 20, caps);
    expect(window.data).toEqual(bytes.subarray(0, 10));
    expect(window.trailer.clipped).toBe(true);
    expect(window.trailer.nextOffset).toBe(10n);
  });
});

describe("bytes window over binary", () => {
  const payload = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37) % 256));
  const source = createBufferWindowSource("res_bin", "application/octet-stream", payload, true);
  const dir = scratchDir("spillway-bytes-");

  it("renders an xxd-identical hex dump", async () => {
    const file = join(dir, "payload.bin");
    writeFileSync(file, payload);
    const xxd = spawnSync("xxd", ["-s", "5", "-l", "45", file], { encoding: "latin1" });
    expect(xxd.status).toBe(0);
    const window = await readBytes(source, 5, 45);
    const rendered = window.trailer.rendered;
    expect(rendered.startsWith("[res_bin] bytes 5-50 of 300\n")).toBe(true);
    const dump = rendered.slice(rendered.indexOf("\n") + 1, rendered.lastIndexOf("\n["));
    expect(`${dump}\n`).toBe(xxd.stdout);
    expect(rendered.endsWith("\n[more: bytes offset=50]\n")).toBe(true);
  });

  it("clips the dump at a line boundary", async () => {
    const big = Buffer.alloc(100_000, 0x41);
    const wide = createBufferWindowSource("res_bigbin", "application/octet-stream", big, true);
    const window = await readBytes(wide, 0);
    const rendered = window.trailer.rendered;
    expect(countChars(rendered)).toBeLessThanOrEqual(50_000);
    const match = /\n\[rendering clipped at 50000 chars; more: bytes offset=(\d+)\]\n$/.exec(
      rendered,
    );
    const next = Number(match?.[1]);
    expect(next % 16).toBe(0);
    const dumpLines = rendered.split("\n").filter((l) => /^[0-9a-f]{8}: /.test(l));
    expect(dumpLines.length * 16).toBe(next);
    expect(window.data.length).toBe(100_000);
  });
});
