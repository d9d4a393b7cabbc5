import { create } from "@bufbuild/protobuf";
import { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { stripAnsi } from "@spillway/wire";
import { describe, expect, it } from "vitest";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource } from "./source.js";

/** A deterministic pseudo-random generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pieces = [
  "disk",
  " ",
  "full",
  "ok",
  "é",
  "\u001b[31m",
  "\u001b[0m",
  "\u001b]0;t\u0007",
  "\u009b1m",
  "x",
];

/** Lines of random words and sequences, some unterminated, over several 64 KiB chunks. */
function payload(seed: number, lines: number): string[] {
  const next = random(seed);
  return Array.from({ length: lines }, () => {
    let line = "";
    const n = Math.floor(next() * 12);
    for (let i = 0; i < n; i++) line += pieces[Math.floor(next() * pieces.length)];
    if (next() < 0.02) line += "\u001b]8;;open";
    return line;
  });
}

async function matchNumbers(text: string, pattern: string, regex: boolean, keepAnsi: boolean) {
  const source = createBufferWindowSource("res_p", "", Buffer.from(text), false, 256);
  const numbers: number[] = [];
  let skip = 0n;
  for (;;) {
    const request = create(ReadToolOutputRequestSchema, {
      handle: "res_p",
      keepAnsi,
      window: { case: "search", value: { pattern, regex, skip, maxMatches: 100 } },
    });
    let next: bigint | undefined;
    for await (const f of readWindow(source, request)) {
      if (f.frame.case === "content" && f.frame.value.body.case === "matches") {
        for (const m of f.frame.value.body.value.matches) numbers.push(Number(m.line?.number));
      }
      if (f.frame.case === "trailer") next = f.frame.value.nextOffset;
    }
    if (next === undefined) return numbers;
    skip = next;
  }
}

describe("search over text holding escape sequences", () => {
  it.each([1, 2, 3])(
    "finds exactly the lines whose visible text matches (seed %i)",
    async (seed) => {
      const lines = payload(seed, 12_000);
      const text = `${lines.join("\n")}\n`;
      for (const [pattern, regex] of [
        ["disk full", false],
        ["full\u00e9", false],
        ["disk\\s+full", true],
      ] as const) {
        const re = new RegExp(pattern, "u");
        const want = lines
          .map((l, i) =>
            (regex ? re.test(stripAnsi(l)) : stripAnsi(l).includes(pattern)) ? i + 1 : 0,
          )
          .filter((n) => n > 0);
        expect(want.length).toBeGreaterThan(10);
        expect(await matchNumbers(text, pattern, regex, false)).toEqual(want);
        const raw = lines
          .map((l, i) => ((regex ? re.test(l) : l.includes(pattern)) ? i + 1 : 0))
          .filter((n) => n > 0);
        expect(await matchNumbers(text, pattern, regex, true)).toEqual(raw);
      }
    },
  );
});
