import fc from "fast-check";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { type BlockRead, type BlockScanTask, scanBlocks } from "./block-scan.js";
import { chunkExpression } from "./chunk-expression.js";
import { findFolded, planFoldedSearch } from "./folded-text.js";
import { planLiteralSearch } from "./literal-finder.js";

/**
 * The blocks where `text` starts (ASCII case aside, for a folded task), or an escape byte is,
 * found one byte at a time.
 */
function naiveBlocks(all: Buffer, task: BlockScanTask): number[] {
  const blocks = new Set<number>();
  const lower = (b: Buffer) => b.toString("latin1").replace(/[A-Z]/g, (c) => c.toLowerCase());
  const want = Buffer.from(task.text);
  for (let at = task.from; at < task.to; at++) {
    const escapeByte = task.escapes && all[at] === 27;
    const here = all.subarray(at, at + task.text.length);
    const text = task.folded === undefined ? here.equals(want) : lower(here) === lower(want);
    if (escapeByte || text) blocks.add(Math.floor(at / task.blockBytes));
  }
  return [...blocks].sort((a, b) => a - b);
}

const readFrom =
  (all: Buffer): BlockRead =>
  (into, length, position) =>
    all.copy(into, 0, position, Math.min(all.length, position + length));

const progress = () => new Int32Array(new SharedArrayBuffer(8));

/** A task over all of `all`, plain search, no cap; `fields` override. */
const taskOver = (all: Buffer, fields: Partial<BlockScanTask>): BlockScanTask => ({
  from: 0,
  to: all.length,
  size: all.length,
  blockBytes: 16,
  spanBytes: 16,
  text: Buffer.from("ab"),
  probeAt: -1,
  probeLength: 0,
  escapes: false,
  cap: Number.MAX_SAFE_INTEGER,
  maxShare: 1,
  ...fields,
});

/** Text of skewed words in both cases, so probes hit often and partial matches abound. */
const textArb = fc
  .array(
    fc.constantFrom(
      "ab",
      "abc",
      "cab",
      "b",
      "\n",
      "\r\n",
      "\r",
      "ca",
      "\u001b",
      "x",
      "abcab",
      "AB",
      "aB",
      "CA",
      "X",
    ),
    { maxLength: 300 },
  )
  .map((parts) => Buffer.from(parts.join("")));

describe("scanBlocks", () => {
  it("finds exactly the blocks where the text starts (in either case, folded) or an escape byte is", () => {
    fc.assert(
      fc.property(
        textArb,
        fc.constantFrom("ab", "abc", "cabx", "bcab", "x", "abcabc"),
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        fc.constantFrom("whole", "probed", "folded"),
        fc.nat(),
        (all, pattern, blockBytes, blocksPerSpan, escapes, search, cut) => {
          const text = Buffer.from(pattern);
          const blocks = Math.ceil(all.length / blockBytes);
          const from = (cut % (blocks + 1)) * blockBytes;
          const plan = search === "probed" ? planLiteralSearch(text, all) : undefined;
          // Folded: the text in either case, by the sample's plan or, with none, its first byte.
          const folded =
            search === "folded"
              ? (planFoldedSearch([text], all) ?? { piece: 0, anchor: 0, guard: -1 })
              : undefined;
          const task = taskOver(all, {
            from: Math.min(from, Math.max(0, blocks - 1) * blockBytes),
            blockBytes,
            spanBytes: blockBytes * blocksPerSpan,
            text,
            ...(folded === undefined ? {} : { folded }),
            probeAt: plan?.anchor ?? -1,
            probeLength: plan?.probe.length ?? 0,
            escapes,
          });
          expect(scanBlocks(task, readFrom(all), progress(), findFolded)).toEqual(
            naiveBlocks(all, task),
          );
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("with a line expression, finds a block on every line that may match, none without the text", () => {
    fc.assert(
      fc.property(
        textArb,
        fc.constantFrom("ab", "cab", "abc"),
        fc.constantFrom("^ab", "b$", "ab+c", "x.*ab", "^[abc]+$"),
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        (all, pattern, expression, blockBytes, blocksPerSpan, escapes) => {
          const text = Buffer.from(pattern);
          const task = taskOver(all, {
            blockBytes,
            spanBytes: blockBytes * blocksPerSpan,
            text,
            escapes,
          });
          const re = new RE2(expression, "u");
          const found =
            scanBlocks(task, readFrom(all), progress(), findFolded, (line) => re.test(line)) ?? [];
          // Every line that may match (as the splitter cuts it: without `\n` and a `\r` that
          // ends it) meets a block found, so the search reads it; blocks are found only where
          // the text or an escape byte starts.
          for (let start = 0; start < all.length; ) {
            const newline = all.indexOf(10, start);
            const next = newline < 0 ? all.length : newline + 1;
            let end = newline < 0 ? all.length : newline;
            if (end > start && all[end - 1] === 13) end--;
            const line = all.subarray(start, end);
            const may = (escapes && line.includes(27)) || (line.includes(text) && re.test(line));
            if (may) {
              const blocks = found.filter(
                (block) => block * blockBytes < next && (block + 1) * blockBytes > start,
              );
              expect(blocks.length, `line at ${start}`).toBeGreaterThan(0);
            }
            start = next;
          }
          expect(found.filter((block) => !naiveBlocks(all, task).includes(block))).toEqual([]);
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("by expression, finds exactly the blocks where a line starts that matches alone or holds an escape byte", () => {
    fc.assert(
      fc.property(
        textArb,
        // Each may run over many lines at once; `\s`, `[^a]` and `(?s)` also match across them.
        fc.constantFrom("ab+c", "x.*ab", "[abc]{3}", "ca|xb", "\\bab", "\\Bab", "^ab", "a\\s*b"),
        fc.constantFrom("c[^a]b", "(?s)b.c", "(?i)xab", "b\\b", "ab$", "^$", "c\\s*$", "[$]|b$"),
        fc.boolean(),
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 3 }),
        (all, one, other, pickOther, blockBytes, blocksPerSpan, escapes, cuts) => {
          const expression = pickOther ? other : one;
          const alone = new RE2(expression, "u");
          const lines = new RE2(chunkExpression(expression) ?? "", "gmu");
          const findMatch = (text: Buffer, at: number) => {
            lines.lastIndex = at;
            return lines.exec(text)?.index ?? -1;
          };
          // The payload's blocks cut into consecutive tasks sharing one progress.
          const blocks = Math.ceil(all.length / blockBytes);
          const bounds = [...new Set([0, ...cuts.map((cut) => cut % (blocks + 1)), blocks])].sort(
            (a, b) => a - b,
          );
          const shared = progress();
          const found: number[] = [];
          for (let k = 1; k < bounds.length; k++) {
            const task = taskOver(all, {
              from: (bounds[k - 1] as number) * blockBytes,
              to: Math.min(all.length, (bounds[k] as number) * blockBytes),
              blockBytes,
              spanBytes: blockBytes * blocksPerSpan,
              text: Buffer.alloc(0),
              byExpression: true,
              escapes,
            });
            const test = (line: Buffer) => alone.test(line);
            found.push(
              ...(scanBlocks(task, readFrom(all), shared, findFolded, test, findMatch) ?? []),
            );
          }
          const expected = new Set<number>();
          for (let start = 0; start < all.length; ) {
            const newline = all.indexOf(10, start);
            let end = newline < 0 ? all.length : newline;
            if (end > start && all[end - 1] === 13) end--;
            const line = all.subarray(start, end);
            if ((escapes && line.includes(27)) || alone.test(line)) {
              expected.add(Math.floor(start / blockBytes));
            }
            start = newline < 0 ? all.length : newline + 1;
          }
          expect([...new Set(found)].sort((a, b) => a - b)).toEqual(
            [...expected].sort((a, b) => a - b),
          );
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it("by expression, counts a line that runs more than 64 KiB past its span, matching or not", () => {
    const long = `${"a".repeat(70_000)}needle`;
    const all = Buffer.from(`x\n${long}\n${long}\n`);
    const lines = new RE2("needle", "gmu");
    const alone = new RE2("needle", "u");
    const findMatch = (text: Buffer, at: number) => {
      lines.lastIndex = at;
      return lines.exec(text)?.index ?? -1;
    };
    const task = taskOver(all, {
      blockBytes: 16,
      spanBytes: 16,
      text: Buffer.alloc(0),
      byExpression: true,
    });
    const test = (line: Buffer) => alone.test(line);
    // The first long line starts in the first span and ends past its 64 KiB: it counts
    // untested; the second starts in a span that reads it whole, and matches.
    expect(scanBlocks(task, readFrom(all), progress(), findFolded, test, findMatch)).toEqual([
      0,
      Math.floor((2 + long.length + 1) / 16),
    ]);
  });

  it("counts a text that straddles the end of its range in the block where it starts", () => {
    const all = Buffer.from("....ab..");
    const task = taskOver(all, { to: 5, blockBytes: 5, spanBytes: 5 });
    expect(scanBlocks(task, readFrom(all), progress(), findFolded)).toEqual([0]);
  });

  it("gives up past its cap, or its share of the blocks scanned, and stops its peers", () => {
    const all = Buffer.from("ab".repeat(4096));
    const base = taskOver(all, { cap: 100 });
    const shared = progress();
    expect(scanBlocks(base, readFrom(all), shared, findFolded)).toBeUndefined();
    expect(Atomics.load(shared, 0)).toBe(1);
    expect(scanBlocks({ ...base, from: 16 }, readFrom(all), shared, findFolded)).toBeUndefined();
    const share = progress();
    expect(
      scanBlocks({ ...base, cap: 10_000, maxShare: 0.5 }, readFrom(all), share, findFolded),
    ).toBeUndefined();
    // It judges the share only once 16 spans are scanned.
    expect(Atomics.load(share, 1)).toBe(16);
  });

  it("gives up on a folded text whose anchor byte proves common, and stops its peers", () => {
    // "b" or "B" every other byte, "abc" nowhere: no block holds it, yet each byte is a stop.
    const all = Buffer.from("aB".repeat(2 * 1024 * 1024));
    const folded = { piece: 0, anchor: 1, guard: 2 };
    const task = taskOver(all, { text: Buffer.from("abc"), folded, blockBytes: 65_536 });
    const wide = { ...task, spanBytes: 65_536 };
    const shared = progress();
    expect(scanBlocks(wide, readFrom(all), shared, findFolded)).toBeUndefined();
    expect(Atomics.load(shared, 0)).toBe(1);
    // The same bytes with a rare anchor: scanned to the end, nothing found.
    const rare = Buffer.from("aC".repeat(2 * 1024 * 1024));
    expect(
      scanBlocks({ ...wide, size: rare.length }, readFrom(rare), progress(), findFolded),
    ).toEqual([]);
  });
});
