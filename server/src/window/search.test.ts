import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Match,
  ReadToolOutputRequestSchema,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { countingSlice } from "../../../test/support/counting-slice.js";
import { rechunked } from "../../../test/support/rechunked-source.js";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import { countChars, createWindowCaps, defaultWindowCaps, type WindowCaps } from "./caps.js";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

interface SearchOptions {
  regex?: boolean;
  ignoreCase?: boolean;
  maxMatches?: number;
  skip?: number;
  contextLines?: number;
}

interface SearchResult {
  matches: Match[];
  trailer: WindowTrailer;
}

/** Runs a search window. */
async function search(
  source: WindowSource,
  pattern: string,
  opts: SearchOptions = {},
  caps: WindowCaps = defaultWindowCaps,
): Promise<SearchResult> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "run",
    handle: source.handle,
    window: {
      case: "search",
      value: {
        pattern,
        regex: opts.regex ?? false,
        ignoreCase: opts.ignoreCase ?? false,
        maxMatches: opts.maxMatches,
        skip: BigInt(opts.skip ?? 0),
        contextLines: opts.contextLines ?? 0,
      },
    },
  });
  const out: SearchResult = { matches: [], trailer: undefined as never };
  for await (const frame of readWindow(source, request, caps)) {
    if (frame.frame.case === "content" && frame.frame.value.body.case === "matches") {
      out.matches.push(...frame.frame.value.body.value.matches);
    }
    if (frame.frame.case === "trailer") out.trailer = frame.frame.value;
  }
  return out;
}

/** Returns the ConnectError code a promise rejects with. */
async function codeOf(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err).code;
  }
  return undefined;
}

const words = ["alpha", "Beta", "gamma", "delta", "ALPHA beta", "épsilon", "zeta"];
const text = `${Array.from({ length: 2000 }, (_, i) => `${i}: ${words[(i * 3) % words.length]} ${words[i % 5]}`).join("\n")}\n`;
const dir = scratchDir("spillway-search-");
const file = join(dir, "words.txt");
writeFileSync(file, text);
const cLocale = { ...process.env, LC_ALL: "C.UTF-8" };

/** Line numbers grep reports for a pattern. */
function grepNumbers(args: readonly string[]): number[] {
  const out = spawnSync("grep", ["-n", ...args, file], { encoding: "utf8", env: cLocale });
  return out.stdout
    .split("\n")
    .filter((row) => row !== "")
    .map((row) => Number(row.slice(0, row.indexOf(":"))));
}

const numbersOf = (r: SearchResult): number[] => r.matches.map((m) => Number(m.line?.number));
const big = { maxMatches: 1000 };
const wideCaps: WindowCaps = { ...defaultWindowCaps, maxMatches: 1000, maxWindowChars: 1_000_000 };

describe("search matches like grep", () => {
  const source = createBufferWindowSource("res_s", "text/plain", Buffer.from(text), false);

  it("finds a literal on every chunking (grep -F)", async () => {
    const expected = grepNumbers(["-F", "a ALPHA"]);
    expect(expected.length).toBeGreaterThan(100);
    for (const sizes of [[65536], [1], [5, 17, 3], [4093]]) {
      const result = await search(rechunked(source, sizes), "a ALPHA", big, wideCaps);
      expect(numbersOf(result)).toEqual(expected.slice(0, 1000));
    }
  });

  it("finds a regex (grep -E)", async () => {
    const expected = grepNumbers(["-E", "^1[0-9]*: (gamma|zeta) "]);
    const result = await search(
      source,
      "^1[0-9]*: (gamma|zeta) ",
      { regex: true, ...big },
      wideCaps,
    );
    expect(numbersOf(result)).toEqual(expected);
    expect(result.trailer.totalMatches).toBe(BigInt(expected.length));
    expect(result.trailer.nextOffset).toBeUndefined();
  });

  it("ignores case for literals and regexes (grep -i)", async () => {
    const expected = grepNumbers(["-i", "-F", "alpha.beta".replace(".", " ")]);
    const literal = await search(source, "alpha beta", { ignoreCase: true, ...big }, wideCaps);
    expect(numbersOf(literal)).toEqual(expected);
    const regex = await search(
      source,
      "ÉPSILON",
      { ignoreCase: true, regex: true, ...big },
      wideCaps,
    );
    expect(numbersOf(regex)).toEqual(grepNumbers(["-F", "épsilon"]));
    const dotLiteral = await search(source, "a.b", { ignoreCase: true }, wideCaps);
    expect(dotLiteral.matches).toEqual([]);
  });

  it("shows context exactly like grep -n -C", async () => {
    const grep = spawnSync("grep", ["-n", "-C", "2", "-F", "zeta alpha", file], {
      encoding: "utf8",
      env: cLocale,
    });
    const expectedBody = grep.stdout.replace(
      /^(\d+)([:-])/gm,
      (_, n: string, tag: string) => `${n.padStart(6)}${tag}\t`,
    );
    const result = await search(source, "zeta alpha", { contextLines: 2, ...big }, wideCaps);
    const rendered = result.trailer.rendered;
    const body = rendered.slice(rendered.indexOf("\n") + 1, rendered.lastIndexOf("["));
    expect(body).toBe(expectedBody);
    const first = result.matches[0];
    const n = Number(first?.line?.number);
    expect(first?.before.map((l) => Number(l.number))).toEqual([n - 2, n - 1]);
    expect(first?.after.map((l) => Number(l.number))).toEqual([n + 1, n + 2]);
  });

  it("pages with skip and max_matches, then reports the total", async () => {
    const expected = grepNumbers(["-F", "delta"]);
    const first = await search(source, "delta", { maxMatches: 10 });
    expect(numbersOf(first)).toEqual(expected.slice(0, 10));
    expect(first.trailer.nextOffset).toBe(10n);
    expect(first.trailer.totalMatches).toBeUndefined();
    expect(first.trailer.eof).toBe(false);
    expect(first.trailer.rendered.endsWith("[more matches: skip=10]\n")).toBe(true);
    const page = await search(source, "delta", { maxMatches: 10, skip: 10 });
    expect(numbersOf(page)).toEqual(expected.slice(10, 20));
    const tail = await search(source, "delta", { maxMatches: 1000, skip: expected.length - 3 });
    expect(numbersOf(tail)).toEqual(expected.slice(-3));
    expect(tail.trailer.totalMatches).toBe(BigInt(expected.length));
    expect(tail.trailer.nextOffset).toBeUndefined();
    expect(tail.trailer.rendered.endsWith("[no more matches]\n")).toBe(true);
  });

  it("returns 100 matches by default and never more than the cap", async () => {
    expect((await search(source, "a")).matches).toHaveLength(100);
    expect((await search(source, "a", { maxMatches: 5000 })).matches).toHaveLength(100);
  });

  it("stops at the character cap with the right skip", async () => {
    const result = await search(
      source,
      "a",
      { maxMatches: 1000 },
      { ...defaultWindowCaps, maxMatches: 1000, maxWindowChars: 6200 },
    );
    const shown = result.matches.length;
    expect(shown).toBeGreaterThan(0);
    expect(shown).toBeLessThan(1000);
    expect(countChars(result.trailer.rendered)).toBeLessThanOrEqual(6200);
    expect(result.trailer.clipped).toBe(true);
    expect(result.trailer.nextOffset).toBe(BigInt(shown));
    expect(
      result.trailer.rendered.endsWith(
        `[window clipped at 6200 chars; more matches: skip=${shown}]\n`,
      ),
    ).toBe(true);
  });
});

describe("search edge cases", () => {
  it("matches per line, without the \\r of a CRLF", async () => {
    const source = createBufferWindowSource(
      "res_crlf",
      "text/plain",
      Buffer.from("foo\r\nbar foo\r\nfoo\r"),
      false,
    );
    const result = await search(source, "foo$", { regex: true });
    expect(numbersOf(result)).toEqual([1, 2, 3]);
    expect(result.matches[1]?.line?.text).toBe("bar foo");
    // A \r ending the last line goes as one before a \n does.
    expect(result.matches[2]?.line?.text).toBe("foo");
    const literal = await search(source, "foo\r", {});
    expect(numbersOf(literal)).toEqual([]);
  });

  it("refuses invalid patterns, backreferences and lookaround with INVALID_ARGUMENT", async () => {
    const source = createBufferWindowSource("res_bad", "text/plain", Buffer.from("aa\n"), false);
    expect(await codeOf(search(source, "(unclosed", { regex: true }))).toBe(Code.InvalidArgument);
    expect(await codeOf(search(source, "(a)\\1", { regex: true }))).toBe(Code.InvalidArgument);
    expect(await codeOf(search(source, "a(?=a)", { regex: true }))).toBe(Code.InvalidArgument);
    expect(await codeOf(search(source, "", {}))).toBe(Code.InvalidArgument);
    expect(await codeOf(search(source, "(unclosed", {}))).toBeUndefined();
  });

  it("refuses an expression RE2 runs slowly, before it holds the event loop for seconds", async () => {
    // Linear time, but at 10-40 µs a byte: one test of a 500 KB line took 8 s.
    const long = createBufferWindowSource(
      "res_long",
      "text/plain",
      Buffer.from(`${"é".repeat(250_000)}\n`),
      false,
    );
    for (const pattern of ["(?:.{100}){10}\\d", "\\p{L}{200}\\d"]) {
      const refused = await search(long, pattern, { regex: true }).catch((err: unknown) =>
        ConnectError.from(err),
      );
      expect(refused, pattern).toBeInstanceOf(ConnectError);
      expect((refused as ConnectError).code).toBe(Code.InvalidArgument);
      expect((refused as ConnectError).rawMessage).toMatch(
        /^search pattern ".*" is too slow for RE2: it ran at \d+ ns a byte over a sample line, above the limit of 250 /,
      );
    }
    // Refused again from the verdict kept, not measured again: the same figure, to the ns.
    const again = async () =>
      (await search(long, "(?:.{100}){10}\\d", { regex: true }).catch((err: unknown) =>
        ConnectError.from(err),
      )) as ConnectError;
    expect((await again()).rawMessage).toBe((await again()).rawMessage);
    // Counted repetitions RE2 runs fast are not refused.
    for (const pattern of [".{100}\\d", "\\w{100}\\d", "(a|b|c|é){100}x", "[a-zé]{30}\\d"]) {
      expect(numbersOf(await search(long, pattern, { regex: true })), pattern).toEqual([]);
    }
  });

  it("ends a search whose expression is slow on this output, though fast on the sample", async () => {
    // RE2 tracks every place a match may start: on random a and b, `a[ab]{1000}c` keeps about
    // 500 alive at each byte (3.8 µs a byte), where the sample costs it 1.6 ns.
    let seed = 7;
    const ab = (n: number) =>
      Array.from({ length: n }, () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed & 1024 ? "a" : "b";
      }).join("");
    const shapes = {
      "lines of 4 KiB": Array.from({ length: 256 }, () => ab(4096)).join("\n"),
      "one line of 1 MiB": ab(1 << 20),
    };
    for (const [shape, text] of Object.entries(shapes)) {
      const source = createBufferWindowSource("res_ab", "text/plain", Buffer.from(text), false);
      const refused = await search(source, "a[ab]{1000}c", { regex: true }).catch((err: unknown) =>
        ConnectError.from(err),
      );
      expect(refused, shape).toBeInstanceOf(ConnectError);
      expect((refused as ConnectError).code, shape).toBe(Code.InvalidArgument);
      expect((refused as ConnectError).rawMessage, shape).toMatch(
        /^search pattern "a\[ab\]\{1000\}c" is too slow for RE2 on this output: (it ran at \d+ ns a byte, above the limit of 250|a line of 1048576 bytes took it over 50 ms, the limit for a line over 8192 bytes \(25 ns a byte, at least 50 ms\)) /,
      );
    }
  });

  it("tests a line longer than the inline bound off the event loop, with the same answers", async () => {
    const long = `${"x".repeat(3 << 20)} needle42`;
    const source = createBufferWindowSource(
      "res_longline",
      "text/plain",
      Buffer.from(`short needle1\n${long}\nneedle\n${"y".repeat(40_000)}\n`),
      false,
    );
    expect(numbersOf(await search(source, "needle\\d+$", { regex: true }))).toEqual([1, 2]);
    expect(numbersOf(await search(source, "NEEDLE\\d", { regex: true, ignoreCase: true }))).toEqual(
      [1, 2],
    );
    expect(numbersOf(await search(source, "^y+$", { regex: true }))).toEqual([4]);
  });

  it("matches a chunk's lines a piece at a time, each piece in a CPU slice of its own", async () => {
    // Read in chunks of 1 MiB, as the filesystem backend reads.
    const source = rechunked(
      createBufferWindowSource(
        "res_short",
        "text/plain",
        Buffer.from("a\n".repeat(1 << 19)),
        false,
      ),
      [1 << 20],
    );
    for (const regex of [false, true]) {
      const slice = countingSlice();
      const request = create(ReadToolOutputRequestSchema, {
        runId: "run",
        handle: source.handle,
        window: {
          case: "search",
          value: {
            pattern: regex ? "a$" : "a",
            regex,
            skip: BigInt((1 << 19) - 1),
            contextLines: 0,
          },
        },
      });
      let trailer: WindowTrailer | undefined;
      for await (const frame of readWindow(source, request, defaultWindowCaps, undefined, slice)) {
        if (frame.frame.case === "trailer") trailer = frame.frame.value;
      }
      expect(trailer?.totalMatches, String(regex)).toBe(BigInt(1 << 19));
      // 1 MiB of two-byte lines: at least one pause a 64 KiB piece.
      expect(slice.pauses(), String(regex)).toBeGreaterThanOrEqual(16);
    }
  });

  it("answers a ReDoS pattern on a 100k-char line", async () => {
    const line = `${"a".repeat(100_000)}!`;
    const source = createBufferWindowSource(
      "res_redos",
      "text/plain",
      Buffer.from(`${line}\naaaa\n`),
      false,
    );
    const result = await search(source, "(a+)+$", { regex: true });
    expect(numbersOf(result)).toEqual([2]);
    expect(result.trailer.totalMatches).toBe(1n);
  });

  it("trims the far context of a first match that does not fit the window", async () => {
    const lines = Array.from({ length: 100 }, (_, i) =>
      i === 50 ? "hit" : `${i} ${"x".repeat(300)}`,
    );
    const source = createBufferWindowSource(
      "res_trim",
      "text/plain",
      Buffer.from(lines.join("\n")),
      false,
    );
    const caps = createWindowCaps({ maxLineChars: 200, maxWindowChars: 4296 });
    const result = await search(source, "hit", { contextLines: 20 }, caps);
    const [match] = result.matches;
    expect(Number(match?.line?.number)).toBe(51);
    const before = match?.before.map((l) => Number(l.number)) ?? [];
    expect(before.length).toBeGreaterThan(0);
    expect(before.length).toBeLessThan(20);
    expect(before.at(-1)).toBe(50);
    expect(result.trailer.clipped).toBe(true);
    expect(countChars(result.trailer.rendered)).toBeLessThanOrEqual(4296);
    expect(result.trailer.nextOffset).toBe(1n);
  });

  it("says in its last line that the character cap cut the last match's context", async () => {
    const lines = [...Array.from({ length: 26 }, () => `m${"x".repeat(1899)}`), "y".repeat(1000)];
    const source = createBufferWindowSource(
      "res_ctx",
      "text/plain",
      Buffer.from(`${lines.join("\n")}\n`),
      false,
    );
    const result = await search(source, "m", { contextLines: 1 });
    expect(result.matches).toHaveLength(26);
    expect(result.matches.at(-1)?.after).toEqual([]);
    expect(result.trailer.clipped).toBe(true);
    expect(
      result.trailer.rendered.endsWith("\n[window clipped at 50000 chars; no more matches]\n"),
    ).toBe(true);
    expect(countChars(result.trailer.rendered)).toBeLessThanOrEqual(50_000);
  });

  it("says in its last line that a line over the search line cap was searched on its head", async () => {
    const caps = createWindowCaps({ maxSearchLineBytes: 1024 });
    // The search keeps at least what a shown line needs: 2,000 chars of 16 bytes, plus one.
    const note = "lines over 32001 bytes were searched in their first 32001 only";
    const source = createBufferWindowSource(
      "res_long",
      "text/plain",
      Buffer.from(`${"a".repeat(40_000)}NEEDLE\nsecond line NEEDLE\n`),
      false,
    );
    const found = await search(source, "NEEDLE", {}, caps);
    expect(found.matches.map((m) => Number(m.line?.number))).toEqual([2]);
    expect(found.trailer.clipped).toBe(true);
    expect(found.trailer.rendered.endsWith(`\n[no more matches; ${note}]\n`)).toBe(true);
    const alone = createBufferWindowSource(
      "res_long",
      "text/plain",
      Buffer.from(`${"a".repeat(40_000)}NEEDLE`),
      false,
    );
    const none = await search(alone, "NEEDLE", {}, caps);
    expect(none.trailer.rendered).toBe(
      `[res_long] no matches for "NEEDLE"\n[no more matches; ${note}]\n`,
    );
    expect(none.trailer.clipped).toBe(true);
    // A window with no room left for the note ends before the line; the next one says it.
    const rows = Array.from({ length: 3 }, () => `NEEDLE ${"b".repeat(1975)}`);
    const full = createBufferWindowSource(
      "res_long",
      "text/plain",
      Buffer.from(`${rows.join("\n")}\n${"a".repeat(40_000)}NEEDLE\nNEEDLE\n`),
      false,
    );
    const tight = createWindowCaps({ maxSearchLineBytes: 1024, maxWindowChars: 6096 });
    const first = await search(full, "NEEDLE", { maxMatches: 10 }, tight);
    expect(first.matches.map((m) => Number(m.line?.number))).toEqual([1, 2, 3]);
    expect(
      first.trailer.rendered.endsWith("[window clipped at 6096 chars; more matches: skip=3]\n"),
    ).toBe(true);
    expect(countChars(first.trailer.rendered)).toBeLessThanOrEqual(6096);
    const second = await search(full, "NEEDLE", { maxMatches: 10, skip: 3 }, tight);
    expect(second.matches.map((m) => Number(m.line?.number))).toEqual([5]);
    expect(second.trailer.rendered.endsWith(`[no more matches; ${note}]\n`)).toBe(true);
  });

  it("reports no matches with the quoted pattern", async () => {
    const source = createBufferWindowSource("res_none", "text/plain", Buffer.from("x\ny\n"), false);
    const result = await search(source, 'say "hi"', {});
    expect(result.trailer.rendered).toBe(
      '[res_none] no matches for "say \\"hi\\""\n[no more matches]\n',
    );
    expect(result.trailer.totalMatches).toBe(0n);
    expect(result.trailer.eof).toBe(true);
  });

  it("gives overlapping context deterministically", async () => {
    const source = createBufferWindowSource(
      "res_ov",
      "text/plain",
      Buffer.from("a\nhit\nhit\nb\nc\n"),
      false,
    );
    const result = await search(source, "hit", { contextLines: 1 });
    const shape = result.matches.map((m) => ({
      line: Number(m.line?.number),
      before: m.before.map((l) => l.text),
      after: m.after.map((l) => l.text),
    }));
    expect(shape).toEqual([
      { line: 2, before: ["a"], after: ["hit"] },
      { line: 3, before: ["hit"], after: ["b"] },
    ]);
    expect(result.trailer.rendered).toBe(
      '[res_ov] matches 1-2 for "hit" (literal) of 2\n     1-\ta\n     2:\thit\n     3:\thit\n     4-\tb\n[no more matches]\n',
    );
  });

  it("reports a binary payload instead of searching it", async () => {
    const source = createBufferWindowSource(
      "res_bin",
      "image/png",
      Buffer.from([0x89, 0x50, 0, 1]),
      true,
    );
    const result = await search(source, "P", {});
    expect(result.matches).toEqual([]);
    expect(result.trailer.rendered).toBe(
      "[res_bin] binary output (4 bytes, image/png); read it with bytes=true\n",
    );
  });
});
