import { toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ReadToolOutputResponseSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { linePayloads } from "../../../test/support/line-payloads.js";
import { rechunked } from "../../../test/support/rechunked-source.js";
import { createWindowCaps, type WindowCaps } from "./caps.js";
import { createLineAnchors } from "./line-anchors.js";
import { createLineIndexer, decodeLineIndexEntries, encodeLineIndex } from "./line-index.js";
import { createLineMatcher, type LineMatcher, type SearchRequest, searchWindow } from "./search.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

/** Runs a search and returns every frame as JSON, for exact comparison. */
async function frames(
  source: WindowSource,
  request: SearchRequest,
  matcher: LineMatcher,
  caps: WindowCaps,
): Promise<string[]> {
  const out: string[] = [];
  for await (const frame of searchWindow(source, request, matcher, caps, true)) {
    out.push(toJsonString(ReadToolOutputResponseSchema, frame));
  }
  return out;
}

/** The same matcher without its candidate finder: every line is delivered and tested. */
function lineByLine(matcher: LineMatcher): LineMatcher {
  return { beginChunk: matcher.beginChunk, test: matcher.test };
}

const words = ["foo", "bar", "Foo", "needle", "x", "", "é", "\r", " ", "FOO", "a1"];
const payloadArb = linePayloads(words, 60);
const requestArb: fc.Arbitrary<SearchRequest> = fc.record({
  pattern: fc.constantFrom(
    "foo",
    "needle",
    "o b",
    "é",
    "x\n",
    "^foo",
    "foo$",
    "(?-m)^bar",
    "\\Afoo",
    "o\\s+b",
    "[^a-z]+x",
    "a1|needle",
    "\\bx\\b",
    "r*",
    // Expressions every match of which holds a plain text, found first.
    "ne+dle",
    "(foo|bar) needle",
    "é foo",
    "x foo[ ]*",
  ),
  regex: fc.boolean(),
  ignoreCase: fc.boolean(),
  maxMatches: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
  skip: fc.integer({ min: 0, max: 3 }),
  contextLines: fc.integer({ min: 0, max: 3 }),
});

describe("search candidate skipping", () => {
  it("returns exactly the frames of a line-by-line search, whatever the chunking and stride", async () => {
    await fc.assert(
      fc.asyncProperty(
        payloadArb,
        requestArb,
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 4, max: 40 }),
        async (payload, request, sizes, stride, maxSearchLineBytes) => {
          const caps = createWindowCaps({ maxLineChars: 8, maxWindowChars: 5_000 });
          const tight = { ...caps, maxSearchLineBytes };
          const source = rechunked(
            createBufferWindowSource("res_p", "text/plain", payload, false, stride),
            sizes,
          );
          const skipping = await frames(source, request, createLineMatcher(request), tight);
          const plain = await frames(
            source,
            request,
            lineByLine(createLineMatcher(request)),
            tight,
          );
          expect(skipping).toEqual(plain);
        },
      ),
      { numRuns: 600 },
    );
  });

  it("numbers a match deep in a payload from the index, not by delivering the lines before it", async () => {
    const lines = Array.from({ length: 50_000 }, (_, k) => (k === 43_210 ? "the needle" : `l${k}`));
    const payload = Buffer.from(`${lines.join("\n")}\n`);
    const source = createBufferWindowSource("res_deep", "text/plain", payload, false, 16);
    const request: SearchRequest = {
      pattern: "needle",
      regex: false,
      ignoreCase: false,
      maxMatches: undefined,
      skip: 0,
      contextLines: 1,
    };
    const matcher = createLineMatcher(request);
    let delivered = 0;
    const counting: LineMatcher = {
      ...matcher,
      test: (line) => {
        delivered++;
        return matcher.test(line);
      },
    };
    const out = await frames(source, request, counting, createWindowCaps({}));
    const trailer = JSON.parse(out.at(-1) ?? "{}").trailer;
    expect(trailer.rendered).toContain("43211:\tthe needle");
    expect(trailer.rendered).toContain("43210-\tl43209");
    expect(trailer.rendered).toContain("43212-\tl43211");
    expect(trailer.totalMatches).toBe("1");
    // The match, its context and the few lines around 64 KiB chunk ends; not 50,000.
    expect(delivered).toBeLessThan(100);
  });

  it("tests (?-m) and \\A patterns line by line, where a chunk scan would miss them", async () => {
    const payload = Buffer.from("zz\nbar one\nzz\nbar two\n");
    const source = createBufferWindowSource("res_m", "text/plain", payload, false);
    // Neither names text every match holds (two letters, and a flag group), so no literal scan
    // picks their candidates either.
    for (const pattern of ["(?-m)^bar", "\\Aba"]) {
      const request: SearchRequest = {
        pattern,
        regex: true,
        ignoreCase: false,
        maxMatches: undefined,
        skip: 0,
        contextLines: 0,
      };
      const matcher = createLineMatcher(request);
      expect(matcher.find).toBeUndefined();
      const out = await frames(source, request, matcher, createWindowCaps({}));
      expect(JSON.parse(out.at(-1) ?? "{}").trailer.totalMatches).toBe("2");
    }
  });
});

describe("line anchors", () => {
  it("walks a streamed, oddly chunked index forward and finds the floor of each offset", async () => {
    const text = Buffer.from(Array.from({ length: 100 }, (_, k) => "x".repeat(k % 7)).join("\n"));
    const indexer = createLineIndexer(3);
    indexer.push(text);
    const index = indexer.finish();
    const encoded = Buffer.from(encodeLineIndex(index));
    const pieces = (async function* () {
      for (let at = 0; at < encoded.length; at += 5) yield encoded.subarray(at, at + 5);
    })();
    const anchors = createLineAnchors(3, decodeLineIndexEntries(pieces));
    let previous = { line: 0, offset: 0 };
    for (let offset = 0; offset <= text.length; offset += 11) {
      await anchors.reach(offset);
      const floor = anchors.floor(offset);
      const k = [...index.offsets].findLastIndex((o) => o <= offset);
      expect(floor).toEqual({ line: 3 * k, offset: index.offsets[k] });
      expect(anchors.previous()).toEqual(
        k === 0 ? undefined : { line: 3 * (k - 1), offset: index.offsets[k - 1] },
      );
      await anchors.reach(index.offsets[k + 1] ?? text.length);
      expect(anchors.next()).toEqual(
        k + 1 < index.offsets.length
          ? { line: 3 * (k + 1), offset: index.offsets[k + 1] }
          : undefined,
      );
      expect(floor?.offset ?? -1).toBeGreaterThanOrEqual(previous.offset);
      previous = floor ?? previous;
    }
    await anchors.close();
  });

  it("refuses a truncated index as DATA_LOSS", async () => {
    const indexer = createLineIndexer(1);
    indexer.push(Buffer.from("a\nb\nc\n"));
    const encoded = Buffer.from(encodeLineIndex(indexer.finish()));
    const pieces = (async function* () {
      yield encoded.subarray(0, encoded.length - 3);
    })();
    const err = await (async () => {
      for await (const _ of decodeLineIndexEntries(pieces));
    })().catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.DataLoss);
    expect(ConnectError.from(err).rawMessage).toBe("line index is truncated");
  });
});
