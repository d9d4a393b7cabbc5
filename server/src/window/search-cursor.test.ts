import { toJson, toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ReadToolOutputResponseSchema,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { linePayloads } from "../../../test/support/line-payloads.js";
import { rechunked } from "../../../test/support/rechunked-source.js";
import { createWindowCaps, type WindowCaps } from "./caps.js";
import { createLineMatcher, type SearchRequest, searchWindow } from "./search.js";
import type { SearchCursor } from "./search-cursor.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

/** One search window: every frame as JSON, and its trailer. */
interface Page {
  readonly frames: string[];
  readonly matches: unknown[];
  readonly trailer: WindowTrailer;
}

async function search(
  source: WindowSource,
  request: SearchRequest,
  caps: WindowCaps,
): Promise<Page> {
  const frames: string[] = [];
  const matches: unknown[] = [];
  let trailer: WindowTrailer | undefined;
  const matcher = createLineMatcher(request);
  for await (const frame of searchWindow(source, request, matcher, caps, true)) {
    frames.push(toJsonString(ReadToolOutputResponseSchema, frame));
    if (frame.frame.case === "content" && frame.frame.value.body.case === "matches") {
      matches.push(
        ...(
          toJson(ReadToolOutputResponseSchema, frame) as never as {
            content: { matches: { matches: unknown[] } };
          }
        ).content.matches.matches,
      );
    }
    if (frame.frame.case === "trailer") trailer = frame.frame.value;
  }
  if (trailer === undefined) throw new Error("no trailer");
  return { frames, matches, trailer };
}

/** The cursor of a trailer, as the engine takes it. */
function cursorOf(trailer: WindowTrailer): SearchCursor | undefined {
  const c = trailer.searchCursor;
  return c === undefined
    ? undefined
    : {
        offset: Number(c.byteOffset),
        line: Number(c.line),
        matchesBefore: Number(c.matchesBefore),
      };
}

const words = ["foo", "bar", "Foo", "needle", "x", "", "é", "\r", " ", "FOO", "a1", "xxxxxxxxxxxx"];
const payloadArb = linePayloads(words, 80);
const patternArb = fc.record({
  pattern: fc.constantFrom("foo", "needle", "o b", "é", "^foo", "foo$", "\\Afoo", "a1|needle", "x"),
  regex: fc.boolean(),
  ignoreCase: fc.boolean(),
  contextLines: fc.integer({ min: 0, max: 4 }),
});

describe("search cursor", () => {
  it("pages by cursor through exactly the matches of one uncapped scan, each page equal to its skip page", async () => {
    await fc.assert(
      fc.asyncProperty(
        payloadArb,
        patternArb,
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 8, max: 40 }),
        async (payload, pattern, pageSize, sizes, stride, maxSearchLineBytes) => {
          const caps = {
            ...createWindowCaps({ maxLineChars: 8, maxWindowChars: 1_000_000 }),
            maxSearchLineBytes,
          };
          const source = rechunked(
            createBufferWindowSource("res_p", "text/plain", payload, false, stride),
            sizes,
          );
          const base = { ...pattern, skip: 0, maxMatches: undefined };
          const whole = await search(source, { ...base, maxMatches: 100 }, caps);
          const paged: unknown[] = [];
          let after: SearchCursor | undefined;
          let skip = 0;
          for (let pages = 0; pages < 100; pages++) {
            const request = { ...base, maxMatches: pageSize, skip };
            const byCursor = await search(source, { ...request, after }, caps);
            const bySkip = await search(source, request, caps);
            expect(byCursor.frames).toEqual(bySkip.frames);
            paged.push(...byCursor.matches);
            const next = byCursor.trailer.nextOffset;
            if (next === undefined) break;
            after = cursorOf(byCursor.trailer);
            expect(after?.matchesBefore).toBe(Number(next) - 1);
            skip = Number(next);
          }
          expect(paged).toEqual(whole.matches);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("answers a forged cursor with INVALID_ARGUMENT or a window, never reading outside the payload", async () => {
    await fc.assert(
      fc.asyncProperty(
        payloadArb,
        patternArb,
        fc.record({
          offset: fc.integer({ min: 0, max: 2000 }),
          line: fc.integer({ min: 0, max: 100 }),
          matchesBefore: fc.integer({ min: 0, max: 100 }),
        }),
        fc.nat(),
        fc.integer({ min: -2, max: 2 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 120 }),
        async (payload, pattern, random, pick, shift, real, skip) => {
          // Half the cursors start at a real line start, with its number shifted a little.
          const starts = [0, ...payload.keys()].filter((k) => k === 0 || payload[k - 1] === 10);
          const lineAt = pick % starts.length;
          const after = real
            ? {
                offset: starts[lineAt] ?? 0,
                line: Math.max(0, lineAt + shift),
                matchesBefore: Math.min(random.matchesBefore, Math.max(0, lineAt + shift)),
              }
            : random;
          const inner = createBufferWindowSource("res_f", "text/plain", payload, false, 3);
          const source: WindowSource = {
            ...inner,
            read: async (offset, length, signal) => {
              expect(offset).toBeGreaterThanOrEqual(0);
              expect(offset + (length ?? 0)).toBeLessThanOrEqual(payload.length);
              return inner.read(offset, length, signal);
            },
          };
          const request = { ...pattern, skip, maxMatches: 3, after };
          try {
            const page = await search(source, request, createWindowCaps({}));
            expect(page.trailer.rendered).not.toBe("");
          } catch (err) {
            expect(err).toBeInstanceOf(ConnectError);
            expect((err as ConnectError).code).toBe(Code.InvalidArgument);
            expect((err as ConnectError).rawMessage).toMatch(/^search\.after: /);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  const text = Buffer.from("zero\nneedle one\ntwo\nneedle three\nfour\n");
  const source = createBufferWindowSource("res_c", "text/plain", text, false);
  const request: SearchRequest = {
    pattern: "needle",
    regex: false,
    ignoreCase: false,
    maxMatches: 1,
    skip: 1,
    contextLines: 1,
  };
  const caps = createWindowCaps({});

  it("resumes at the cursor with the context lines before it", async () => {
    const first = await search(source, { ...request, skip: 0 }, caps);
    expect(first.trailer.searchCursor).toMatchObject({
      byteOffset: 5n,
      line: 1n,
      matchesBefore: 0n,
    });
    const second = await search(source, { ...request, after: cursorOf(first.trailer) }, caps);
    expect(second.trailer.rendered).toBe(
      '[res_c] matches 2-2 for "needle" (literal) of 2\n     3-\ttwo\n     4:\tneedle three\n     5-\tfour\n[no more matches]\n',
    );
    expect(second.trailer.searchCursor).toBeUndefined();
  });

  it.each([
    [{ offset: 6, line: 1, matchesBefore: 0 }, 1, "byte 6 does not start a line"],
    [
      { offset: 5, line: 1, matchesBefore: 2 },
      2,
      "matches_before (2) exceeds the lines before it (1)",
    ],
    [
      { offset: 5, line: 1, matchesBefore: 1 },
      0,
      "skip (0) must be at least the cursor's matches_before (1)",
    ],
    [{ offset: 5, line: 9, matchesBefore: 0 }, 1, "line 9 is beyond the payload's 5 lines"],
    [{ offset: 0, line: 1, matchesBefore: 0 }, 1, "byte 0 starts line 0, not line 1"],
    [{ offset: 5, line: 0, matchesBefore: 0 }, 1, "line 0 starts at byte 0, not 5"],
    [{ offset: 5, line: 2, matchesBefore: 0 }, 1, "byte 5 starts line 1, not line 2"],
    [{ offset: 39, line: 5, matchesBefore: 0 }, 1, "byte 39 is past the payload's end (38 bytes)"],
    [
      { offset: 10_000, line: 1, matchesBefore: 0 },
      1,
      "byte 10000 is past the payload's end (38 bytes)",
    ],
    [{ offset: 38, line: 4, matchesBefore: 0 }, 1, "the payload's end (byte 38) is line 5, not 4"],
  ])("refuses cursor %o with skip %i: %s", async (after, skip, message) => {
    const err = await search(source, { ...request, skip, after }, caps).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toBe(`search.after: ${message}`);
  });

  it("reads context lines longer than its backward blocks exactly as a skip does", async () => {
    const lines = ["a".repeat(40_000), "b".repeat(70_000), "needle 1", "c", "needle 2", "d"];
    const long = createBufferWindowSource(
      "res_l",
      "text/plain",
      Buffer.from(lines.join("\n")),
      false,
    );
    const paging = { ...request, skip: 0, contextLines: 0 };
    const first = await search(long, paging, caps);
    const after = cursorOf(first.trailer);
    expect(after).toEqual({ offset: 110_002, line: 2, matchesBefore: 0 });
    for (const contextLines of [1, 2, 3, 20]) {
      const next = { ...request, skip: 1, contextLines };
      const bySkip = await search(long, next, caps);
      expect((await search(long, { ...next, after }, caps)).frames).toEqual(bySkip.frames);
    }
  });

  it("takes a cursor at the end as the end of the payload", async () => {
    const page = await search(
      source,
      { ...request, skip: 2, after: { offset: 38, line: 5, matchesBefore: 2 } },
      caps,
    );
    expect(page.trailer.returnedMatches).toBe(0n);
    expect(page.trailer.eof).toBe(true);
    expect(page.trailer.nextOffset).toBeUndefined();
  });
});
