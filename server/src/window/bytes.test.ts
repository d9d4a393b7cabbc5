import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  ReadToolOutputRequestSchema,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { stripAnsi } from "@spillway/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rechunked } from "../../../test/support/rechunked-source.js";
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
  keepAnsi = false,
): Promise<BytesResult> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "run",
    handle: source.handle,
    window: {
      case: "bytes",
      value: { offset: BigInt(offset), limit: limit === undefined ? undefined : BigInt(limit) },
    },
    keepAnsi,
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

describe("bytes window shorter than what starts at its offset", () => {
  /** The window's text between its header line and its footer. */
  const body = (rendered: string) =>
    rendered.slice(rendered.indexOf("\n") + 1, rendered.lastIndexOf("\n["));

  it("leaves out a longer sequence whole and points past it", async () => {
    const link = Buffer.from(`log \u001b]8;;${"x".repeat(200)} end\n`);
    const source = createBufferWindowSource("res_osc", "text/plain", link, false);
    const window = await readBytes(source, 4, 100);
    expect(window.data).toEqual(link.subarray(4, 104));
    expect(window.trailer.nextOffset).toBe(104n);
    expect(window.trailer.rendered).toBe(
      "[res_osc] bytes 4-104 of 214\n\n[more: bytes offset=213]\n",
    );
    const next = await readBytes(source, 213, 100);
    expect(next.trailer.rendered).toBe("[res_osc] bytes 213-214 of 214\n\n\n[end of output]\n");
  });

  it("finds the sequence's end past the window, a BEL ending it", async () => {
    const title = Buffer.from(`\u001b]0;${"t".repeat(150)}\u0007after\n`);
    const source = createBufferWindowSource("res_title", "text/plain", title, false);
    const window = await readBytes(source, 0, 64);
    expect(window.trailer.rendered).toBe(
      "[res_title] bytes 0-64 of 161\n\n[more: bytes offset=155]\n",
    );
    const next = await readBytes(source, 155, 64);
    expect(body(next.trailer.rendered)).toBe("after\n");
  });

  it("shows a longer character whole and points past it", async () => {
    const rocket = Buffer.from("🚀 rocket\n");
    const source = createBufferWindowSource("res_r", "text/plain", rocket, false);
    const window = await readBytes(source, 0, 3);
    expect(window.data).toEqual(rocket.subarray(0, 3));
    expect(window.trailer.nextOffset).toBe(3n);
    expect(window.trailer.rendered).toBe("[res_r] bytes 0-3 of 12\n🚀\n[more: bytes offset=4]\n");
    const kept = await readBytes(source, 0, 3, defaultWindowCaps, true);
    expect(kept.trailer.rendered).toBe(window.trailer.rendered);
  });

  it("reads as far as the longest sequence takes", async () => {
    // 4 code points of introducer and 4,092 of 4 bytes each: the 4,096 a sequence may hold.
    const text = `\u001b]0;${"🚀".repeat(4100)}\n`;
    const source = createBufferWindowSource("res_long", "text/plain", Buffer.from(text), false);
    const window = await readBytes(source, 0, 10);
    expect(window.trailer.rendered).toBe(
      "[res_long] bytes 0-10 of 16405\n\n[more: bytes offset=16372]\n",
    );
    const rest = await readBytes(source, 16372);
    expect(body(rest.trailer.rendered)).toBe(`${"🚀".repeat(8)}\n`);
    expect(stripAnsi(text)).toBe(`${"🚀".repeat(8)}\n`);
  });

  it("ends the output when that character is the payload's last", async () => {
    const source = createBufferWindowSource("res_r", "text/plain", Buffer.from("a🚀"), false);
    const window = await readBytes(source, 1, 2);
    expect(window.trailer.eof).toBe(false);
    expect(window.trailer.rendered).toBe("[res_r] bytes 1-3 of 5\n🚀\n[end of output]\n");
  });

  it("points past it when max_bytes_window is the limit", async () => {
    const caps = createWindowCaps({ maxBytesWindow: 2 });
    const source = createBufferWindowSource("res_r", "text/plain", Buffer.from("€uro"), false);
    const window = await readBytes(source, 0, undefined, caps);
    expect(window.trailer.rendered).toBe(
      "[res_r] bytes 0-2 of 6\n€\n[window capped at 2 bytes; more: bytes offset=3]\n",
    );
  });

  /** Text pieces a payload is made of: escape sequences, cut ones, wide characters, lines. */
  const pieces = fc.constantFrom(
    "a",
    "log ",
    "\n",
    "\r\n",
    "é",
    "€",
    "🚀",
    "\u0085",
    "\u001b[1;31m",
    "\u001b[0m",
    "\u001b[12",
    "\u001b]8;;https://example.com/x\u001b\\",
    "\u001b]0;title\u0007",
    "\u001b]0;never closed",
    "\u001bP1$r\u001b",
    "\u009b31m",
    "\u009d0;t\u009c",
    "\u001b(B",
    "\u001b",
    "x".repeat(40),
  );

  it("always advances when paged by its more: offset, and shows the text whole", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(pieces, { maxLength: 40 }).map((parts) => parts.join("")),
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        async (text, limits, sizes, keepAnsi) => {
          const payload = Buffer.from(text);
          const source = rechunked(
            createBufferWindowSource("res_p", "text/plain", payload, false),
            sizes,
          );
          let shown = "";
          let offset = 0;
          for (let step = 0; offset < payload.length; step++) {
            const limit = limits[step % limits.length] ?? 1;
            const { rendered } = (
              await readBytes(source, offset, limit, defaultWindowCaps, keepAnsi)
            ).trailer;
            shown += body(rendered);
            if (rendered.endsWith("\n[end of output]\n")) break;
            const next = Number(/more: bytes offset=(\d+)\]\n$/.exec(rendered)?.[1]);
            expect(next).toBeGreaterThan(offset);
            offset = next;
          }
          expect(shown).toBe(keepAnsi ? text : stripAnsi(text));
        },
      ),
      { numRuns: 500 },
    );
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
