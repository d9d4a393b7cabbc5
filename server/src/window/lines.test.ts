import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  type Line,
  ReadToolOutputRequestSchema,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { rechunked } from "../../../test/support/rechunked-source.js";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import { countChars, createWindowCaps, defaultWindowCaps, type WindowCaps } from "./caps.js";
import { createLineSplitter, type ScannedLine, showLine } from "./lines.js";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

interface Window {
  start: number;
  lines: Line[];
  trailer: WindowTrailer;
  frames: string[];
}

/** Reads a lines window and checks the frame order. */
async function readLines(
  source: WindowSource,
  window: { offset?: bigint; limit?: number; fromEnd?: boolean } | undefined,
  caps: WindowCaps = defaultWindowCaps,
): Promise<Window> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "run",
    handle: source.handle,
    window: window === undefined ? { case: undefined } : { case: "lines", value: window },
  });
  const out: Window = { start: -1, lines: [], trailer: undefined as never, frames: [] };
  for await (const frame of readWindow(source, request, caps)) {
    out.frames.push(frame.frame.case ?? "none");
    if (frame.frame.case === "header") out.start = Number(frame.frame.value.start);
    if (frame.frame.case === "content" && frame.frame.value.body.case === "lines") {
      out.lines.push(...frame.frame.value.body.value.lines);
    }
    if (frame.frame.case === "trailer") out.trailer = frame.frame.value;
  }
  expect(out.frames[0]).toBe("header");
  expect(out.frames.at(-1)).toBe("trailer");
  expect(out.frames.filter((f) => f === "header" || f === "trailer")).toHaveLength(2);
  return out;
}

const wideCaps = createWindowCaps({ maxLineChars: 20_000, maxWindowChars: 10_000_000 });
const cLocale = { ...process.env, LC_ALL: "C" };
const dir = scratchDir("spillway-lines-");

/** Writes text to a temp file and returns its path. */
function tempFile(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** Lines a tool printed, without the final empty piece and with a `\r` before `\n` removed. */
function toolLines(stdout: string): string[] {
  const lines = stdout.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

const gridText = [
  "plain",
  "crlf line\r",
  "",
  "sep\u2028inside",
  "nel\u0085inside",
  "x".repeat(10_000),
  "tab\there",
  "last without newline",
].join("\n");

describe("lines window grid", () => {
  it("numbers and shows lines like grep -n", async () => {
    const file = tempFile("grid.txt", gridText);
    const grepOut = spawnSync("grep", ["-n", "", file], { encoding: "utf8", env: cLocale });
    expect(grepOut.status).toBe(0);
    const expected = toolLines(grepOut.stdout).map((row) => {
      const colon = row.indexOf(":");
      return { number: Number(row.slice(0, colon)), text: row.slice(colon + 1).replace(/\r$/, "") };
    });
    const source = createBufferWindowSource("res_grid", "text/plain", Buffer.from(gridText), false);
    const window = await readLines(source, undefined, wideCaps);
    expect(window.lines.map((l) => ({ number: Number(l.number), text: l.text }))).toEqual(expected);
    expect(source.lineCount).toBe(expected.length);
  });

  it("agrees with sed -n 'a,bp' for a range", async () => {
    const file = tempFile("grid-sed.txt", gridText);
    const sed = spawnSync("sed", ["-n", "3,7p", file], { encoding: "utf8", env: cLocale });
    const expected = toolLines(sed.stdout).map((line) => line.replace(/\r$/, ""));
    const source = createBufferWindowSource(
      "res_sed",
      "text/plain",
      Buffer.from(gridText),
      false,
      2,
    );
    const window = await readLines(source, { offset: 2n, limit: 5 }, wideCaps);
    expect(window.lines.map((l) => l.text)).toEqual(expected);
    expect(window.lines.map((l) => Number(l.number))).toEqual([3, 4, 5, 6, 7]);
    expect(window.start).toBe(2);
    expect(window.trailer.nextOffset).toBe(7n);
  });

  it("gives line byte offsets that point at each line's first byte", async () => {
    const bytes = Buffer.from(gridText);
    const source = createBufferWindowSource("res_off", "text/plain", bytes, false);
    const window = await readLines(source, undefined, wideCaps);
    for (const line of window.lines) {
      const start = Number(line.byteOffset);
      expect(start === 0 || bytes[start - 1] === 10).toBe(true);
    }
  });

  it("shows an empty payload as an empty window", async () => {
    const source = createBufferWindowSource("res_empty", "text/plain", new Uint8Array(0), false);
    const window = await readLines(source, undefined);
    expect(window.lines).toEqual([]);
    expect(window.trailer.eof).toBe(true);
    expect(window.trailer.rendered).toBe(
      "[res_empty] no lines at offset 0: the output has 0 lines\n",
    );
  });

  it("keeps a byte order mark at the start of a line as text, as grep -n shows it", async () => {
    const long = `\ufeff${"x".repeat(2500)}`;
    const text = `\ufeffa\n\ufeffb\n\ufeff\u001b[31mred\u001b[0m\n${long}\n`;
    const source = createBufferWindowSource("res_bom", "text/plain", Buffer.from(text), false);
    const window = await readLines(source, undefined);
    expect(window.lines.map((l) => l.text)).toEqual([
      "\ufeffa",
      "\ufeffb",
      "\ufeffred",
      long.slice(0, 2000),
    ]);
    expect(window.trailer.rendered).toContain("     2\t\ufeffb\n");
    const line = (head: string): ScannedLine => ({
      index: 0,
      start: 0,
      head: Buffer.from(head),
      complete: true,
      end: Buffer.byteLength(head),
    });
    // Search shows its lines through showLine too.
    expect(showLine(line("\ufeffb"), 2000).text).toBe("\ufeffb");
    expect(showLine(line("\ufeff\u001b[1mb"), 2000, true).text).toBe("\ufeffb");
  });

  it("removes a \\r that ends the last line, as it does before a \\n", async () => {
    const source = createBufferWindowSource(
      "res_cr",
      "text/plain",
      Buffer.from("one\r\ntwo\r"),
      false,
    );
    const window = await readLines(source, undefined);
    expect(window.lines.map((l) => l.text)).toEqual(["one", "two"]);
    expect(window.trailer.rendered).toBe(
      "[res_cr] lines 1-2 of 2 (9 bytes)\n     1\tone\n     2\ttwo\n[end of output]\n",
    );
    expect(window.trailer.returnedBytes).toBe(9n);
    const tail = await readLines(source, { offset: 0n, limit: 1, fromEnd: true });
    expect(tail.lines.map((l) => l.text)).toEqual(["two"]);
    // Split anywhere, and with a \r alone or inside the line.
    for (const [text, last] of [
      ["one\r\ntwo\r", "two"],
      ["a\n\r", ""],
      ["\r", ""],
      ["a\rb\r\r", "a\rb\r"],
    ] as const) {
      const bytes = Buffer.from(text);
      for (let cut = 0; cut <= bytes.length; cut++) {
        const heads: string[] = [];
        const splitter = createLineSplitter({
          firstLine: 0,
          firstOffset: 0,
          skipUntil: 0,
          keepBytes: 10,
          onLine: (line) => heads.push(line.head.toString()) > 0,
        });
        splitter.push(bytes.subarray(0, cut));
        splitter.push(bytes.subarray(cut));
        splitter.finish();
        expect(heads.at(-1), `${JSON.stringify(text)} cut at ${cut}`).toBe(last);
      }
    }
  });

  it("is the same whatever the chunking", async () => {
    const bytes = Buffer.from(gridText);
    const base = createBufferWindowSource("res_chunks", "text/plain", bytes, false, 2);
    const whole = await readLines(base, { offset: 1n, limit: 6 }, wideCaps);
    for (const sizes of [[1], [3, 1, 7], [4096]]) {
      const window = await readLines(rechunked(base, sizes), { offset: 1n, limit: 6 }, wideCaps);
      expect(window.lines).toEqual(whole.lines);
      expect(window.trailer).toEqual(whole.trailer);
    }
  });
});

/** Matches a UTF-16 surrogate that is not part of a pair. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Builds a payload of numbered lines of varying length. */
function numberedLines(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `line ${i} ${"é".repeat(i % 13)}`);
}

describe("deep and tail windows", () => {
  const lines = numberedLines(5000);
  const text = `${lines.join("\n")}\n`;

  it("returns a deep window equal to the naive slice, starting from the index", async () => {
    const base = createBufferWindowSource("res_deep", "text/plain", Buffer.from(text), false, 64);
    const reads: number[] = [];
    const source: WindowSource = {
      ...base,
      read: (offset, length, signal) => {
        reads.push(offset);
        return base.read(offset, length, signal);
      },
    };
    const window = await readLines(source, { offset: 4321n, limit: 100 });
    expect(window.lines.map((l) => l.text)).toEqual(lines.slice(4321, 4421));
    expect(window.lines[0]?.number).toBe(4322n);
    const seek = await base.seekLine(4321);
    expect(seek.line).toBe(4288);
    expect(reads).toEqual([seek.offset]);
    expect(Buffer.from(text).subarray(seek.offset).toString().startsWith("line 4288 ")).toBe(true);
  });

  it("tails with from_end and pages back with next_offset", async () => {
    const source = createBufferWindowSource("res_tail", "text/plain", Buffer.from(text), false, 64);
    const last = await readLines(source, { offset: 0n, limit: 10, fromEnd: true });
    expect(last.lines.map((l) => l.text)).toEqual(lines.slice(-10));
    expect(last.start).toBe(4990);
    expect(last.trailer.nextOffset).toBe(10n);
    expect(last.trailer.rendered.endsWith("[earlier lines: offset=10 from_end=true]\n")).toBe(true);
    const before = await readLines(source, { offset: 10n, limit: 10, fromEnd: true });
    expect(before.lines.map((l) => l.text)).toEqual(lines.slice(-20, -10));
    const head = await readLines(source, { offset: 4995n, limit: 10, fromEnd: true });
    expect(head.lines.map((l) => l.text)).toEqual(lines.slice(0, 5));
    expect(head.trailer.nextOffset).toBeUndefined();
    expect(head.trailer.rendered.endsWith("[no earlier lines]\n")).toBe(true);
  });

  it("returns an empty window, not an error, past the end", async () => {
    const source = createBufferWindowSource("res_past", "text/plain", Buffer.from(text), false);
    const forward = await readLines(source, { offset: 5000n });
    expect(forward.lines).toEqual([]);
    expect(forward.trailer.eof).toBe(true);
    expect(forward.trailer.nextOffset).toBeUndefined();
    expect(forward.trailer.rendered).toBe(
      "[res_past] no lines at offset 5000: the output has 5000 lines\n",
    );
    const back = await readLines(source, { offset: 9999n, fromEnd: true });
    expect(back.lines).toEqual([]);
    expect(back.trailer.eof).toBe(true);
  });
});

describe("lines window caps", () => {
  it("caps a request for 5000 lines at 1000", async () => {
    const text = numberedLines(3000).join("\n");
    const source = createBufferWindowSource("res_cap", "text/plain", Buffer.from(text), false);
    const window = await readLines(source, { offset: 0n, limit: 5000 });
    expect(window.lines).toHaveLength(1000);
    expect(window.trailer.nextOffset).toBe(1000n);
    expect(window.trailer.clipped).toBe(true);
    expect(window.frames.filter((f) => f === "content")).toHaveLength(4);
    expect(
      window.trailer.rendered.endsWith("[window capped at 1000 lines; more: offset=1000]\n"),
    ).toBe(true);
  });

  it("clips 100 lines of 1,000 chars at 50,000 chars with the right next_offset", async () => {
    const lines = Array.from({ length: 100 }, (_, i) => String(i % 10).repeat(1000));
    const source = createBufferWindowSource(
      "res_wide",
      "text/plain",
      Buffer.from(lines.join("\n")),
      false,
    );
    const window = await readLines(source, { offset: 0n, limit: 100 });
    const shown = window.lines.length;
    // Each row is 6 digits + tab + 1000 chars + newline; the header and footer take the rest.
    expect(shown).toBe(49);
    expect(window.trailer.nextOffset).toBe(BigInt(shown));
    expect(window.trailer.clipped).toBe(true);
    expect(countChars(window.trailer.rendered)).toBeLessThanOrEqual(50_000);
    expect(
      window.trailer.rendered.endsWith("[window clipped at 50000 chars; more: offset=49]\n"),
    ).toBe(true);
    const next = await readLines(source, { offset: 49n, limit: 100 });
    expect(next.lines[0]?.text).toBe(lines[49]);
  });

  it("clips a long line at 2000 code points without splitting an emoji", async () => {
    const line = "😀".repeat(2500);
    const text = `${"a".repeat(1999)}😀tail\n${line}\nok`;
    const source = createBufferWindowSource("res_emoji", "text/plain", Buffer.from(text), false);
    const window = await readLines(source, undefined);
    const [first, second, third] = window.lines;
    expect(first?.text).toBe(`${"a".repeat(1999)}😀`);
    expect(first?.clipped).toBe(true);
    expect(second?.text).toBe("😀".repeat(2000));
    expect(loneSurrogate.test(second?.text ?? "")).toBe(false);
    expect(third?.text).toBe("ok");
    expect(window.trailer.clipped).toBe(true);
    const continues = 1999 + 4;
    expect(window.trailer.rendered).toContain(
      `a😀 [… line clipped at 2000 chars; it continues at byte ${continues}: read bytes offset=${continues}]\n`,
    );
    const secondStart = Buffer.byteLength(`${"a".repeat(1999)}😀tail\n`);
    expect(window.trailer.rendered).toContain(`continues at byte ${secondStart + 8000}:`);
  });

  it("does not assemble a huge line wholly", () => {
    const delivered: ScannedLine[] = [];
    const splitter = createLineSplitter({
      firstLine: 0,
      firstOffset: 0,
      skipUntil: 0,
      keepBytes: 10,
      onLine: (line) => {
        delivered.push({ ...line, head: Buffer.from(line.head) });
        return true;
      },
    });
    for (let i = 0; i < 1000; i++) splitter.push(Buffer.from("z".repeat(100)));
    splitter.push(Buffer.from("\nnext\r\n"));
    splitter.finish();
    expect(delivered.map((l) => [l.index, l.start, l.head.toString(), l.complete])).toEqual([
      [0, 0, "z".repeat(10), false],
      [1, 100_001, "next", true],
    ]);
    expect(delivered[1]?.end).toBe(100_007);
  });

  it("jumps past unread bytes between lines, keeping true numbers and offsets", () => {
    const delivered: [number, number, string][] = [];
    const splitter = createLineSplitter({
      firstLine: 0,
      firstOffset: 0,
      skipUntil: 0,
      keepBytes: 10,
      onLine: (line) => {
        delivered.push([line.index, line.start, line.head.toString()]);
        return true;
      },
    });
    splitter.push(Buffer.from("a\nb"));
    expect(() => splitter.jump(100, 40)).toThrow("from inside line 1");
    splitter.push(Buffer.from("c\n"));
    splitter.jump(100, 40);
    splitter.push(Buffer.from("far\nend"));
    splitter.finish();
    expect(delivered).toEqual([
      [0, 0, "a"],
      [1, 2, "bc"],
      [40, 100, "far"],
      [41, 104, "end"],
    ]);
  });
});

describe("lines windows without escape sequences", () => {
  it("are stripped of them wherever they first appear: a later chunk, or across two", async () => {
    const plain = Array.from({ length: 20 }, (_, i) => `plain line ${i}`);
    const coloured = Array.from(
      { length: 20 },
      (_, i) => `\x1b[31mred ${i}\x1b[0m and \u009b1mbold\u009b0m`,
    );
    const bytes = Buffer.from(`${[...plain, ...coloured].join("\n")}\n`);
    const shown = [...plain, ...coloured.map((_, i) => `red ${i} and bold`)];
    for (const sizes of [[7], [64], [300, 5], [bytes.length]]) {
      const source = rechunked(
        createBufferWindowSource("res_a", "text/plain", bytes, false),
        sizes,
      );
      for (const offset of [0, 15, 25]) {
        const window = await readLines(source, { offset: BigInt(offset), limit: 40 });
        expect(window.lines.map((line) => line.text)).toEqual(shown.slice(offset));
      }
    }
  });
});
