import { toJsonString } from "@bufbuild/protobuf";
import { ReadToolOutputResponseSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import fc from "fast-check";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { linePayloads } from "../../../test/support/line-payloads.js";
import { rechunked } from "../../../test/support/rechunked-source.js";
import { createWindowCaps, type WindowCaps } from "./caps.js";
import { createLineMatcher, type SearchRequest, searchWindow } from "./search.js";
import type { BlockSkipping } from "./search-segments.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

/** Runs a search and returns every frame as JSON, for exact comparison. */
async function frames(
  source: WindowSource,
  request: SearchRequest,
  caps: WindowCaps,
  skipping: BlockSkipping,
): Promise<string[]> {
  const out: string[] = [];
  const matcher = createLineMatcher(request);
  for await (const frame of searchWindow(
    source,
    request,
    matcher,
    caps,
    true,
    undefined,
    skipping,
  )) {
    out.push(toJsonString(ReadToolOutputResponseSchema, frame));
  }
  return out;
}

/** Reads the whole payload, as a search did before it could skip blocks. */
const never: BlockSkipping = {
  minBytes: Number.POSITIVE_INFINITY,
  headBytes: 0,
  blockBytes: 1,
  maxBlockShare: 1,
};

/** Wraps a source to count the bytes its reads yield and the blocks it was asked for. */
function counting(source: WindowSource): WindowSource & { bytesRead: () => number } {
  let bytes = 0;
  return {
    ...source,
    read: async (offset, length, signal) => {
      const inner = await source.read(offset, length, signal);
      return (async function* () {
        for await (const chunk of inner) {
          bytes += chunk.byteLength;
          yield chunk;
        }
      })();
    },
    bytesRead: () => bytes,
  };
}

const red = "\u001b[31m";
// Case variants, and the two characters RE2 folds into ASCII (KELVIN SIGN, LONG S).
const words = [
  ...["foo", "bar", "needle", "nee", "dle", "x", "", "é", "\r", " ", red, "\u001b[0m"],
  ...["NEEDLE", "Nee", "FOO", "k", "\u212a", "s", "\u017f", "S"],
];
const payloadArb = linePayloads(words, 80);
const requestArb: fc.Arbitrary<SearchRequest> = fc.record({
  pattern: fc.constantFrom(
    "needle",
    "foo",
    "o b",
    "é",
    "red needle",
    "ne+dle",
    "(foo|bar) needle",
    "x foo[ ]*",
    "needle$",
    "K needle",
    "NEEDLE",
    "foo S",
    "nEe+dle",
    "needle|foo S",
    "bar x|NEEDLE|Nee dle",
    // No plain text, or text on most lines: the expression itself is run over the lines.
    "[a-z]{6}",
    "x\\s*foo",
    "\\bbar\\b",
    "[a-z]{3}$",
    "^$",
    "e\\s*$",
    "[A-Z]{3} ?needle",
    "o+ [^x]+ needle",
    // Two texts each matching line holds: the rarer is looked for.
    "foo bar.*dle",
  ),
  regex: fc.boolean(),
  ignoreCase: fc.boolean(),
  maxMatches: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
  skip: fc.integer({ min: 0, max: 3 }),
  contextLines: fc.integer({ min: 0, max: 3 }),
  keepAnsi: fc.boolean(),
});
const skippingArb: fc.Arbitrary<BlockSkipping> = fc.record({
  minBytes: fc.constant(0),
  headBytes: fc.integer({ min: 0, max: 200 }),
  blockBytes: fc.integer({ min: 1, max: 64 }),
  maxBlockShare: fc.constantFrom(1, 0.5, 0.1),
});

describe("search reading only the blocks that hold its text", () => {
  it("returns exactly the frames of a search that reads everything", async () => {
    await fc.assert(
      fc.asyncProperty(
        payloadArb,
        requestArb,
        skippingArb,
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 1, max: 5 }),
        async (payload, request, skipping, sizes, stride) => {
          const caps = createWindowCaps({ maxLineChars: 8, maxWindowChars: 5_000 });
          const source = rechunked(
            createBufferWindowSource("res_b", "text/plain", payload, false, stride),
            sizes,
          );
          expect(await frames(source, request, caps, skipping)).toEqual(
            await frames(source, request, caps, never),
          );
        },
      ),
      { numRuns: 1_500 },
    );
  });

  it("counts exactly the lines RE2 matches, ignoring case with K and \u017f folded in", async () => {
    const plain = words.filter((word) => !word.includes("\u001b"));
    await fc.assert(
      fc.asyncProperty(
        linePayloads(plain, 80),
        fc.constantFrom(
          "K needle",
          "NEEDLE",
          "foo S",
          "nEe+dle",
          "o b",
          "(foo|bar) needle",
          "needle|foo S",
          "bar x|NEEDLE|Nee dle",
          "[a-z]{6}",
          "x\\s*foo",
          "[a-z]{3}$",
          "^$",
          "e\\s*$",
          "[A-Z]{3} ?needle",
          "o+ [^x]+ needle",
          "foo bar.*dle",
        ),
        fc.boolean(),
        fc.boolean(),
        skippingArb,
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 3 }),
        async (payload, pattern, regex, ignoreCase, skipping, sizes) => {
          const source = rechunked(
            createBufferWindowSource("res_i", "text/plain", payload, false, 2),
            sizes,
          );
          const request: SearchRequest = {
            pattern,
            regex,
            ignoreCase,
            maxMatches: 1_000,
            skip: 0,
            contextLines: 0,
          };
          const out = await frames(source, request, createWindowCaps({}), skipping);
          const expressionSource = regex ? pattern : pattern.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&");
          const expression = new RE2(expressionSource, ignoreCase ? "iu" : "u");
          const lines = payload.toString("utf8").split("\n");
          if (lines.at(-1) === "") lines.pop();
          // A line is tested without a `\r` ending it, before a `\n` or the payload's end.
          const expected = lines.filter((line) => expression.test(line.replace(/\r$/, ""))).length;
          expect(JSON.parse(out.at(-1) ?? "{}").trailer.totalMatches ?? "0").toBe(String(expected));
        },
      ),
      { numRuns: 1_500 },
    );
  });

  it("reads the blocks around rare matches and counts every line", async () => {
    const lines = Array.from({ length: 200_000 }, (_, k) =>
      k % 40_000 === 123 ? `line ${k} the needle here` : `line ${k} nothing to see`,
    );
    const payload = Buffer.from(`${lines.join("\n")}\n`);
    const skipping: BlockSkipping = {
      minBytes: 0,
      headBytes: 64 * 1024,
      blockBytes: 16 * 1024,
      maxBlockShare: 1 / 8,
    };
    const request: SearchRequest = {
      pattern: "needle",
      regex: false,
      ignoreCase: false,
      maxMatches: undefined,
      skip: 0,
      contextLines: 2,
    };
    const source = counting(createBufferWindowSource("res_r", "text/plain", payload, false, 256));
    const out = await frames(source, request, createWindowCaps({}), skipping);
    const trailer = JSON.parse(out.at(-1) ?? "{}").trailer;
    expect(trailer.totalMatches).toBe("5");
    expect(trailer.rendered).toContain("160124:\tline 160123 the needle here");
    expect(trailer.rendered).toContain("160122-\tline 160121 nothing to see");
    expect(trailer.rendered).toContain("160126-\tline 160125 nothing to see");
    // The head, and five stretches of a block and an index stride or two on each side.
    expect(source.bytesRead()).toBeLessThan(payload.length / 8);
    expect(await frames(source, request, createWindowCaps({}), never)).toEqual(out);
  });

  it("reads each stretch's blocks as the source answers it, and stops asking once it has its matches", async () => {
    const lines = Array.from({ length: 200_000 }, (_, k) =>
      k % 1_000 === 500 ? `line ${k} the needle` : `line ${k} nothing`,
    );
    const payload = Buffer.from(`${lines.join("\n")}\n`);
    const inner = createBufferWindowSource("res_s", "text/plain", payload, false, 64);
    let answered = 0;
    const source: WindowSource = {
      ...inner,
      findBlocks: async function* (query, signal) {
        for await (const stretch of inner.findBlocks?.(query, signal) ?? []) {
          answered++;
          yield stretch;
        }
      },
    };
    const skipping: BlockSkipping = {
      minBytes: 0,
      headBytes: 0,
      blockBytes: 4096,
      maxBlockShare: 1,
    };
    const request: SearchRequest = {
      pattern: "needle",
      regex: false,
      ignoreCase: false,
      maxMatches: 5,
      skip: 0,
      contextLines: 1,
    };
    const out = await frames(source, request, createWindowCaps({}), skipping);
    expect(JSON.parse(out.at(-1) ?? "{}").trailer.rendered).toContain(
      "4501:\tline 4500 the needle",
    );
    // Its five matches lie in the first two of 60 stretches of 16 blocks: no more were asked for.
    expect(answered).toBeLessThanOrEqual(2);
    expect(out).toEqual(await frames(source, request, createWindowCaps({}), never));
  });

  it("reads on as usual when more blocks than its share hold the text", async () => {
    const lines = Array.from(
      { length: 50_000 },
      (_, k) => `line ${k}${k % 50 === 0 ? " hit" : ""}`,
    );
    const payload = Buffer.from(`${lines.join("\n")}\n`);
    const request: SearchRequest = {
      pattern: "hit",
      regex: false,
      ignoreCase: false,
      maxMatches: 10,
      skip: 995,
      contextLines: 0,
    };
    const skipping: BlockSkipping = {
      minBytes: 0,
      headBytes: 0,
      blockBytes: 4096,
      maxBlockShare: 1 / 8,
    };
    const inner = createBufferWindowSource("res_c", "text/plain", payload, false);
    const answers: unknown[] = [];
    const source: WindowSource = {
      ...inner,
      findBlocks: async function* (query, signal) {
        for await (const stretch of inner.findBlocks?.(query, signal) ?? []) {
          answers.push(stretch.blocks);
          yield stretch;
        }
      },
    };
    const out = await frames(source, request, createWindowCaps({}), skipping);
    // Past an eighth of the blocks the scan gives up, and the rest is read whole.
    expect(answers.length).toBeLessThan(4);
    expect(answers.at(-1)).toBeUndefined();
    expect(JSON.parse(out.at(-1) ?? "{}").trailer.totalMatches).toBe("1000");
    expect(out).toEqual(await frames(source, request, createWindowCaps({}), never));
  });
});
