import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import RE2 from "re2";
import { type CpuSlice, unsliced } from "../cpu-turns.js";
import type { LinePattern } from "./block-scan.js";
import { clipString, countChars, defaultMaxMatches, type WindowCaps } from "./caps.js";
import { chunkExpression } from "./chunk-expression.js";
import {
  type FoldedPlan,
  type FoldedStreams,
  findFolded,
  foldedPieces,
  newFoldedStreams,
  planFoldedSearch,
} from "./folded-text.js";
import {
  createLineSplitter,
  lineKeepBytes,
  type ScannedLine,
  type ShownLine,
  showLine,
  toLineMessage,
} from "./lines.js";
import {
  commonInSample,
  createLiteralFinder,
  type LiteralFinder,
  sampleOccurrences,
} from "./literal-finder.js";
import { createRegexThread, type RegexThread } from "./regex-thread.js";
import {
  groupSeparator,
  renderLineRow,
  renderNoMatches,
  renderSearchFooter,
  renderSearchHeader,
  type SearchHeader,
  searchFooterOf,
  widestSearchFooterChars,
} from "./render.js";
import { requiredBranchLiterals } from "./required-literal.js";
import {
  checkCursorTie,
  resolveSearchStart,
  type SearchCursor,
  searchCursorCheck,
} from "./search-cursor.js";
import {
  type BlockSkipping,
  blockSegments,
  defaultBlockSkipping,
  type HeldText,
  type RequiredText,
  type SearchSegment,
} from "./search-segments.js";
import { type WindowSource, windowHeaderFrame } from "./source.js";
import {
  hasAnsiBytes,
  nextAnsiByte,
  type StrippedChunk,
  stripAnsiBytes,
  stripChunk,
} from "./visible-text.js";

/** SearchRequest is a search window with its int64 fields already converted. */
export interface SearchRequest {
  /** A literal string, or an RE2 expression when regex is set. */
  readonly pattern: string;
  /** Treat pattern as an RE2 regular expression. */
  readonly regex: boolean;
  /** Match case-insensitively. */
  readonly ignoreCase: boolean;
  /** Matches asked for; undefined means the default (100). Capped by caps.maxMatches. */
  readonly maxMatches: number | undefined;
  /** Matching lines to skip before the first one returned. */
  readonly skip: number;
  /** Lines of context before and after each match (0–20). */
  readonly contextLines: number;
  /** Where to resume (the previous window's cursor); the window is the one skip selects. */
  readonly after?: SearchCursor | undefined;
  /**
   * Keep terminal escape sequences: match and show lines as stored. By default a line holding
   * a sequence is matched and shown without its sequences, as the model sees it.
   */
  readonly keepAnsi?: boolean;
}

/** LineMatcher decides whether one line on the `\n` grid matches a pattern. */
export interface LineMatcher {
  /** Announces the chunk whose lines are tested next and its payload offset. */
  beginChunk(chunk: Buffer, offset: number): void;
  /** True when the line (terminator excluded) contains a match. */
  test(line: ScannedLine): boolean;
  /**
   * Finds candidates in the announced chunk: the offset of the first byte at or after `from`
   * (a line start) where a match may begin, -1 when none can in the rest of the chunk. Never
   * misses a line that test() would accept; unset when the pattern cannot promise that.
   */
  readonly find?: (chunk: Buffer, from: number) => number;
  /**
   * Bytes every line test() accepts holds as stored (or none), and the expression such a line
   * matches (`line`, for a regex), unless (with `escapes`) the line holds an escape byte: a
   * search may read only the lines that do. Unset when the pattern names no such bytes and its
   * expression cannot be run over many lines at once.
   */
  readonly required?: RequiredText;
}

/** maxContextLines is the most context lines a search shows on each side of a match. */
export const maxContextLines = 20;

/** Escapes every RE2 metacharacter so the pattern matches itself literally. */
function escapeLiteral(pattern: string): string {
  return pattern.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&");
}

/**
 * Patterns RE2 refused to compile, by flags and source, with its reason: refused again without
 * compiling, since a refusal can cost tens of milliseconds (`\p{L}{1000}`: 30 ms). Bounded like
 * slowExpressions: cleared when full.
 */
const invalidExpressions = new Map<string, string>();

/**
 * Compiled expressions by flags and source, least recently used first. Reused across searches
 * (a page of a search compiles what the page before it did), which also bounds the memory they
 * hold: RE2 keeps each expression's automaton (2.7 MB for `a[ab]{1000}c` after a few searches)
 * outside V8's heap, where no collection is started for it, and 200 searches compiling their
 * own took a server from 47 to 587 MB.
 */
const compiledExpressions = new Map<string, RE2>();
const compiledExpressionEntries = 64;

/**
 * Compiles a pattern with RE2 (or takes it from compiledExpressions), turning its complaint into
 * INVALID_ARGUMENT. The expression is shared: a caller of a global one sets lastIndex before
 * each exec.
 */
function compile(source: string, flags: string): RE2 {
  const key = `${flags}/${source}`;
  const known = compiledExpressions.get(key);
  if (known !== undefined) {
    compiledExpressions.delete(key);
    compiledExpressions.set(key, known);
    return known;
  }
  let reason = invalidExpressions.get(key);
  if (reason === undefined) {
    try {
      const expression = new RE2(source, flags);
      if (compiledExpressions.size >= compiledExpressionEntries) {
        compiledExpressions.delete(compiledExpressions.keys().next().value ?? key);
      }
      compiledExpressions.set(key, expression);
      return expression;
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
      if (invalidExpressions.size >= slowExpressionEntries) invalidExpressions.clear();
      invalidExpressions.set(key, reason);
    }
  }
  throw new ConnectError(`invalid search pattern: ${reason}`, Code.InvalidArgument);
}

/**
 * The most a search expression may cost RE2 per byte of text, in nanoseconds. RE2 runs most
 * expressions at 1-5 ns a byte; one whose automaton outgrows RE2's fast path (a counted
 * repetition of a broad class inside another, `(?:.{100}){10}`, or of a Unicode property,
 * `\p{L}{50}`) falls back to a slower engine at 1-20 µs a byte, and one call tests a whole line
 * or chunk, which no CPU slice can cut: 500 KB held an event loop for 8 s.
 */
const maxExpressionNanosPerByte = 250;

/**
 * A line of text without a line break, as RE2 meets it in logs and tool output: words,
 * numbers and punctuation, then long runs of letters (ASCII and accented), digits, hex, and
 * two-byte and three-byte letters, since an expression may be slow only on a long run of what
 * it repeats (`\p{L}{200}` on a word of 200 letters). About 2.5 KiB: a slow expression costs
 * tens of milliseconds on it, a fast one microseconds.
 */
const costSample = Buffer.from(
  [
    "2026-12-04T10:00:01.123Z INFO  worker-7 [req=4f3a9c] processed batch 12345 in 44 ms: café résumé naïve 東京 データ ok=true, path=/var/lib/x.log; ".repeat(
      6,
    ),
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZàéîõüçñß".repeat(8),
    "0123456789".repeat(26),
    "4f3a9c0b1d2e7f86".repeat(16),
    "é".repeat(128),
    "東京データ".repeat(17),
  ].join(""),
);

/**
 * Expressions measured clearly slow (ten times the limit or more), by flags and source: each is
 * refused again without running it, so that repeating one cannot spend tens of milliseconds of
 * the event loop a call. Only clear verdicts are kept, so a pause that slowed a measurement is
 * never remembered. Bounded like iregexp's cache: cleared when full.
 */
const slowExpressions = new Map<string, number>();
const slowExpressionEntries = 256;

/**
 * Nanoseconds one run of `expression` over costSample took: the lesser of the wall clock and
 * the process's CPU time. On a busy machine the wall clock counts time the thread waited for a
 * core (then a pattern that runs at 1 ns a byte measured 7,000), and the process's CPU time
 * counts its other threads' work meanwhile; a run slow by both really is slow.
 */
function timeRun(expression: RE2): number {
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  expression.test(costSample);
  const wall = Number(process.hrtime.bigint() - started);
  const cpu = process.cpuUsage(cpuBefore);
  return Math.min(wall, (cpu.user + cpu.system) * 1000);
}

/**
 * Refuses an expression RE2 would run too slowly for a search, measured on costSample after a
 * short warm-up, run up to three times while over the limit, the fastest run counting, so
 * neither building the automaton nor a busy machine refuses a fast one: INVALID_ARGUMENT naming
 * the pattern, its cost and the limit.
 */
function checkExpressionCost(expression: RE2, source: string, flags: string): void {
  const key = `${flags}/${source}`;
  let nanosPerByte = slowExpressions.get(key) ?? 0;
  if (nanosPerByte === 0) {
    expression.test(costSample.subarray(0, 64));
    let best = Number.POSITIVE_INFINITY;
    // The first run also builds RE2's automaton for the sample (18 ms for (a|b|c|é){100}x on a
    // loaded machine, then 3 ns a byte): only a later run over the limit tells a slow one.
    for (let run = 0; run < 3 && best / costSample.length > maxExpressionNanosPerByte; run++) {
      best = Math.min(best, timeRun(expression));
    }
    nanosPerByte = best / costSample.length;
    if (nanosPerByte >= 10 * maxExpressionNanosPerByte) {
      if (slowExpressions.size >= slowExpressionEntries) slowExpressions.clear();
      slowExpressions.set(key, nanosPerByte);
    }
  }
  if (nanosPerByte > maxExpressionNanosPerByte) {
    throw new ConnectError(
      `search pattern ${JSON.stringify(source)} is too slow for RE2: it ran at ${Math.round(nanosPerByte)} ns a byte over a sample line, above the limit of ${maxExpressionNanosPerByte} (its automaton outgrows RE2's fast path, as nested counted repetitions like (?:.{100}){10} or \\p{L}{50} do); simplify it`,
      Code.InvalidArgument,
    );
  }
}

/**
 * A line a search expression tests longer than this is tested on the regex thread, with a
 * budget; a scan of a chunk runs RE2 over views of whole lines no longer than this. So no RE2
 * call on the event loop reads more: at the slowest rates RE2 reaches (4 µs a byte on text
 * shaped like its expression), 33 ms.
 */
const inlineRegexBytes = 8 * 1024;
/** RE2 time a search spends on its output before its rate there is judged. */
const meterGraceNanos = 20e6;
/**
 * Lines shorter than this are tested unmetered; a chunk's view counts as at least this many
 * bytes, since a call's fixed cost is not the expression's.
 */
const meterMinBytes = 256;
/** A long line's budget on the regex thread: this many nanoseconds a byte, and at least 50 ms. */
const longLineNanosPerByte = 25;
const longLineMinBudgetMs = 50;

/** The thread long lines are tested on, one for the process, started by the first such test. */
let regexThread: RegexThread | undefined;

/**
 * RegexMeter runs a search's RE2 calls and judges their cost on the output being searched,
 * which the sample in checkExpressionCost cannot stand for: RE2 slows down most on text shaped
 * like its expression (`a[ab]{1000}c` runs at 1.6 ns a byte on the sample and 3,840 on random
 * `a`s and `b`s), and the text is the caller's.
 */
export interface RegexMeter {
  /** RE2's test of `text`: inline when short, on the regex thread within a budget when long. */
  test(expression: RE2, text: Buffer): boolean;
  /**
   * The start of the first match of the global, multi-line `expression` in `chunk` at or after
   * `from` (a line start), or -1; a line too long to scan inline is returned as a candidate.
   */
  exec(expression: RE2, chunk: Buffer, from: number): number;
}

/** Runs `call` of `expression` from its start, leaving its lastIndex as it was. */
function again(expression: RE2, call: () => unknown): void {
  const lastIndex = expression.lastIndex;
  expression.lastIndex = 0;
  call();
  expression.lastIndex = lastIndex;
}

/**
 * createRegexMeter meters every RE2 call of one search of `source` with `flags`. Once its calls
 * have taken meterGraceNanos, a rate above maxExpressionNanosPerByte, or a long line over its
 * budget, ends the search INVALID_ARGUMENT: the pattern is too slow on this output. Before a
 * rate ends it, the slowest call is timed again and counted at that time: one call the
 * process was descheduled or collecting in took a fast pattern over the grace on a small
 * output (a 68-byte search refused at 231,460 ns a byte on a loaded machine), while a slow
 * pattern is as slow again. `now` is the clock, in milliseconds.
 */
export function createRegexMeter(
  source: string,
  flags: string,
  now: () => number = () => performance.now(),
): RegexMeter {
  let nanos = 0;
  let bytes = 0;
  /** The slowest call not yet timed again, and how to make it again. */
  let slowest = 0;
  let retry: (() => unknown) | undefined;
  const why =
    "(text shaped like a large counted repetition, such as [ab]{1000} over a run of a and b, makes RE2 track every place a match may start); simplify it";
  const tooSlow = (nanosPerByte: number) =>
    new ConnectError(
      `search pattern ${JSON.stringify(source)} is too slow for RE2 on this output: it ran at ${Math.round(nanosPerByte)} ns a byte, above the limit of ${maxExpressionNanosPerByte} ${why}`,
      Code.InvalidArgument,
    );
  const tooSlowOnLine = (lineBytes: number, budgetMs: number) =>
    new ConnectError(
      `search pattern ${JSON.stringify(source)} is too slow for RE2 on this output: a line of ${lineBytes} bytes took it over ${Math.round(budgetMs)} ms, the limit for a line over ${inlineRegexBytes} bytes (${longLineNanosPerByte} ns a byte, at least ${longLineMinBudgetMs} ms) ${why}`,
      Code.InvalidArgument,
    );
  const overRate = () => nanos >= meterGraceNanos && nanos / bytes > maxExpressionNanosPerByte;
  const charge = (started: number, length: number, call?: () => unknown) => {
    const took = (now() - started) * 1e6;
    nanos += took;
    bytes += Math.max(length, meterMinBytes);
    if (call !== undefined && took > slowest) {
      slowest = took;
      retry = call;
    }
    if (!overRate()) return;
    if (retry !== undefined) {
      const retried = now();
      retry();
      nanos += (now() - retried) * 1e6 - slowest;
      slowest = 0;
      retry = undefined;
    }
    if (overRate()) throw tooSlow(nanos / bytes);
  };
  return {
    test(expression, text) {
      // A short line costs little even at the slowest rates (a millisecond), and reading the
      // clock around each would cost a search of many of them a tenth of its time.
      if (text.length < meterMinBytes) return expression.test(text);
      const started = now();
      if (text.length <= inlineRegexBytes) {
        const matched = expression.test(text);
        charge(started, text.length, () => again(expression, () => expression.test(text)));
        return matched;
      }
      const budgetMs = Math.max(longLineMinBudgetMs, (text.length * longLineNanosPerByte) / 1e6);
      regexThread ??= createRegexThread();
      const thread = regexThread;
      const verdict = thread.test(source, flags, text, budgetMs);
      if (verdict === "over budget") throw tooSlowOnLine(text.length, budgetMs);
      charge(started, text.length, () => thread.test(source, flags, text, budgetMs));
      return verdict === "match";
    },
    exec(expression, chunk, from) {
      for (let at = from; at < chunk.length; ) {
        let end = chunk.length;
        if (end - at > inlineRegexBytes) {
          const lastBreak = chunk.lastIndexOf(10, at + inlineRegexBytes - 1);
          // One line longer than a view: a candidate, which its own test settles.
          if (lastBreak < at) return at;
          end = lastBreak + 1;
        }
        const started = now();
        const view = chunk.subarray(at, end);
        expression.lastIndex = 0;
        const match = expression.exec(view);
        charge(started, end - at, () => again(expression, () => expression.exec(view)));
        if (match !== null) return at + match.index;
        at = end;
      }
      return -1;
    },
  };
}

/**
 * Case-sensitive literal matcher: candidates come from a LiteralFinder run over the whole
 * chunk, so lines before the next candidate are rejected without being looked at; lines that
 * straddle chunks are searched on their own.
 */
function createLiteralMatcher(pattern: string): LineMatcher {
  const needle = Buffer.from(pattern, "utf8");
  if (needle.includes(10)) return { beginChunk() {}, test: () => false, find: () => -1 };
  const finder = createLiteralFinder(needle);
  let chunk: Buffer = Buffer.alloc(0);
  let chunkStart = 0;
  let candidate = -1;
  /** Moves candidate to the first occurrence at or after chunk offset `from`. */
  const advance = (from: number): void => {
    if (candidate === Number.POSITIVE_INFINITY || candidate >= chunkStart + from) return;
    const at = finder.indexOf(chunk, from);
    candidate = at < 0 ? Number.POSITIVE_INFINITY : chunkStart + at;
  };
  return {
    beginChunk(next, offset) {
      chunk = next;
      chunkStart = offset;
      candidate = -1;
    },
    test(line) {
      const contentEnd = line.start + line.head.length;
      if (!line.complete || line.start < chunkStart) return line.head.includes(needle);
      advance(line.start - chunkStart);
      return candidate + needle.length <= contentEnd;
    },
    find(_chunk, from) {
      advance(from);
      return candidate === Number.POSITIVE_INFINITY ? -1 : candidate - chunkStart;
    },
  };
}

/** Finds the next place a match may begin in a chunk, at or after `from`; -1 for none. */
type Find = (chunk: Buffer, from: number) => number;

/** A matcher's candidates, and the hook that drops what they learned of the last chunk. */
interface Candidates {
  readonly find: Find;
  readonly beginChunk: () => void;
}

/**
 * Candidates from occurrences of any of several texts (one finder each, returning where its
 * text occurs): the start of the line holding the earliest. Each finder's last answer is kept
 * while it still lies ahead, so a scan through a chunk runs each finder over it about once.
 */
function lineOfEarliest(finders: readonly Find[]): Candidates {
  let view: Buffer | undefined;
  const next = finders.map(() => -1);
  const since = finders.map(() => Number.POSITIVE_INFINITY);
  return {
    // A chunk's memory may be reused for the next: what was found in it is dropped.
    beginChunk: () => {
      view = undefined;
    },
    find: (chunk, from) => {
      if (chunk !== view) {
        view = chunk;
        since.fill(Number.POSITIVE_INFINITY);
      }
      let earliest = -1;
      finders.forEach((finder, k) => {
        let at = next[k] as number;
        if ((since[k] as number) > from || (at >= 0 && at < from)) {
          at = finder(chunk, from);
          next[k] = at;
          since[k] = from;
        }
        if (at >= 0 && (earliest < 0 || at < earliest)) earliest = at;
      });
      return earliest < 0 ? -1 : Math.max(from, chunk.lastIndexOf(10, earliest) + 1);
    },
  };
}

/**
 * Candidates of an expression whose every match holds all the texts of one of `branches`
 * (requiredBranchLiterals): lines holding, for some branch, the one of its texts rarest in the
 * first chunk searched, each found by a LiteralFinder; lines holding none cannot match. When
 * those texts are common there (commonInSample, over the branches together), `chunked`'s
 * candidates instead, if it is set: testing each line holding them would cost more.
 */
function literalCandidates(
  branches: readonly (readonly string[])[],
  chunked: Find | undefined,
): Candidates {
  let finders: LiteralFinder[] = [];
  let find: Find | undefined;
  const pickFinders = (chunk: Buffer): LiteralFinder[] => {
    let occurrences = 0;
    const picked = branches.map((literals) => {
      const texts = literals.map((literal) => Buffer.from(literal, "utf8"));
      const counts = texts.map((text) => sampleOccurrences(chunk, text));
      let pick = 0;
      for (let k = 1; k < texts.length; k++) if ((counts[k] ?? 0) < (counts[pick] ?? 0)) pick = k;
      occurrences += counts[pick] ?? 0;
      return createLiteralFinder(texts[pick] as Buffer);
    });
    if (chunked !== undefined && commonInSample(occurrences, chunk)) find = chunked;
    return picked;
  };
  const earliest = lineOfEarliest(
    branches.map(
      (_, k) => (chunk: Buffer, from: number) => (finders[k] as LiteralFinder).indexOf(chunk, from),
    ),
  );
  return {
    beginChunk: earliest.beginChunk,
    find: (chunk, from) => {
      if (find === undefined) {
        finders = pickFinders(chunk);
        find ??= earliest.find;
      }
      return find(chunk, from);
    },
  };
}

/**
 * Candidates of a case-insensitive expression whose every match holds each piece of one of
 * `branches` (foldedPieces of its texts): lines holding, for some branch, the piece the first
 * chunk searched says is cheapest to look for, ASCII case aside (findFolded); `fallback`'s
 * candidates when some branch has no byte rare enough there.
 */
function foldedCandidates(
  branches: readonly (readonly Buffer[])[],
  fallback: Find | undefined,
): Candidates {
  let plans: (FoldedPlan | undefined)[] | undefined;
  const streams = branches.map(() => newFoldedStreams());
  const earliest = lineOfEarliest(
    branches.map((pieces, k) => (chunk: Buffer, from: number) => {
      const plan = plans?.[k] as FoldedPlan;
      const piece = pieces[plan.piece] as Buffer;
      return findFolded(chunk, from, chunk.length, piece, plan, streams[k] as FoldedStreams);
    }),
  );
  return {
    beginChunk: () => {
      earliest.beginChunk();
      for (const stream of streams) stream.view = undefined;
    },
    find: (chunk, from) => {
      plans ??= branches.map((pieces) => planFoldedSearch(pieces, chunk));
      if (plans.some((plan) => plan === undefined)) {
        return fallback === undefined ? from : fallback(chunk, from);
      }
      return earliest.find(chunk, from);
    },
  };
}

/**
 * RE2 matcher: each line is tested alone. Candidates come from a literal scan when every match
 * holds some plain text (requiredBranchLiterals, one set of texts per top-level alternative:
 * RE2 then only tests the lines holding one; with ignore case, pieces of them whose case
 * variants are ASCII's, foldedPieces), else, or when that text is common (commonInSample),
 * from one RE2 scan of the whole chunk in multi-line mode (chunkExpression: `$` widened to a
 * line's `\r\n`), where every line that matches alone also has a match starting inside it (a
 * match across lines only adds a candidate that its line's own test then rejects). `held` is
 * what every matching line holds one of, empty when it names nothing; `pattern`, the
 * expression as a block scan runs it (with the form run over many lines, unless it may not be).
 */
function createRegexMatcher(
  source: string,
  ignoreCase: boolean,
): LineMatcher & {
  readonly testText: (text: Buffer) => boolean;
  readonly held: readonly HeldText[];
  readonly pattern: LinePattern;
} {
  const flags = ignoreCase ? "iu" : "u";
  const line = compile(source, flags);
  checkExpressionCost(line, source, flags);
  const meter = createRegexMeter(source, flags);
  const branches = requiredBranchLiterals(source);
  const pieces = ignoreCase ? branches.map(foldedPieces) : [];
  const folded = pieces.length > 0 && pieces.every((branch) => branch.length > 0);
  const byLiteral = !ignoreCase && branches.length > 0;
  const chunkSource = chunkExpression(source);
  let chunked: Find | undefined;
  if (chunkSource !== undefined) {
    const expression = compile(chunkSource, ignoreCase ? "gimu" : "gmu");
    chunked = (chunk, from) => meter.exec(expression, chunk, from);
  }
  let find = chunked;
  let beginChunk = () => {};
  let held: HeldText[] = [];
  if (folded) {
    ({ find, beginChunk } = foldedCandidates(pieces, chunked));
    held = pieces.map((branch) => ({ text: branch[0] as Buffer, folded: branch }));
  } else if (byLiteral) {
    ({ find, beginChunk } = literalCandidates(branches, chunked));
    const texts = branches.map((literals) => literals.map((text) => Buffer.from(text, "utf8")));
    if (!texts.some(([text]) => text?.includes(10))) {
      held = texts.map(([text, ...also]) => ({
        text: text as Buffer,
        also: also.filter((other) => !other.includes(10)),
      }));
    }
  }
  return {
    beginChunk,
    held,
    pattern: { source, flags, ...(chunkSource === undefined ? {} : { chunked: chunkSource }) },
    testText: (text) => meter.test(line, text),
    test: (scanned) => meter.test(line, scanned.head),
    ...(find === undefined ? {} : { find }),
  };
}

/**
 * Matches lines as the model sees them: a line holding an escape sequence is tested without
 * its sequences (`testVisible`), any other line by `inner`. In a chunk that holds sequences,
 * candidates come from `findVisible` run over the chunk without its sequences (stripChunk),
 * mapped back to chunk offsets, so the skip-ahead never passes over a line whose visible text
 * matches while its stored bytes do not (a pattern copied from a window that spans a colour
 * code), and a chunk coloured on every line is still scanned once, not line by line.
 */
function visibleTextMatcher(
  inner: LineMatcher,
  testVisible: (visible: Buffer) => boolean,
  findVisible: ((text: Buffer, from: number) => number) | undefined,
): LineMatcher {
  let chunk: Buffer = Buffer.alloc(0);
  // The chunk without its sequences; null once known to hold none, undefined until asked.
  let stripped: StrippedChunk | null | undefined;
  const innerFind = inner.find;
  const find =
    innerFind === undefined || findVisible === undefined
      ? undefined
      : (c: Buffer, from: number): number => {
          if (stripped === undefined) {
            stripped = nextAnsiByte(chunk, 0) < 0 ? null : stripChunk(chunk);
          }
          if (stripped === null) return innerFind(c, from);
          const at = findVisible(stripped.text, stripped.toText(from));
          return at < 0 ? -1 : stripped.toChunk(at);
        };
  return {
    beginChunk(next, offset) {
      inner.beginChunk(next, offset);
      chunk = next;
      stripped = undefined;
    },
    test: (line) =>
      hasAnsiBytes(line.head) ? testVisible(stripAnsiBytes(line.head)) : inner.test(line),
    ...(find === undefined ? {} : { find }),
  };
}

/**
 * createLineMatcher compiles a search pattern. A literal is matched byte for byte (or, with
 * ignore case, by RE2 on the escaped literal); a regex runs on RE2, whose matching time is
 * linear in the line. Unless `keepAnsi` is set, a line holding terminal escape sequences is
 * matched without them (the text the model sees). An empty or invalid pattern,
 * backreferences and lookaround are INVALID_ARGUMENT with RE2's message.
 */
export function createLineMatcher(request: SearchRequest): LineMatcher {
  if (request.pattern === "") {
    throw new ConnectError("search pattern must not be empty", Code.InvalidArgument);
  }
  const escapes = request.keepAnsi !== true;
  if (!request.regex && !request.ignoreCase) {
    const literal = createLiteralMatcher(request.pattern);
    const needle = Buffer.from(request.pattern, "utf8");
    if (needle.includes(10)) return literal;
    const required = { anyOf: [{ text: needle }], escapes };
    if (!escapes) return { ...literal, required };
    const finder = createLiteralFinder(needle);
    const visible = visibleTextMatcher(
      literal,
      (text) => text.includes(needle),
      (text, from) => finder.indexOf(text, from),
    );
    return { ...visible, required };
  }
  const source = request.regex ? request.pattern : escapeLiteral(request.pattern);
  const regex = createRegexMatcher(source, request.ignoreCase);
  // The same RE2 objects test a stripped line and scan a stripped chunk.
  const matcher = escapes ? visibleTextMatcher(regex, regex.testText, regex.find) : regex;
  // With no text to look for, a skipping search looks for the lines the expression matches.
  if (regex.held.length === 0 && regex.pattern.chunked === undefined) return matcher;
  return { ...matcher, required: { anyOf: regex.held, escapes, line: regex.pattern } };
}

/** A line kept for context: a copy of just enough of its head to show it. */
interface KeptLine {
  readonly scanned: ScannedLine;
  shown: ShownLine | undefined;
}

/** A returned match being assembled. */
interface OpenMatch {
  readonly line: ShownLine;
  readonly before: ShownLine[];
  readonly after: ShownLine[];
}

/** The first range a search resumed at a cursor reads; each next one is twice as long. */
const firstResumeBytes = 16 * 1024;
/** Past this range length a resumed search reads the rest of the payload in one go. */
const lastResumeBytes = 8 * 1024 * 1024;

/**
 * Streams the payload from `offset` in ranges that double from firstResumeBytes, so a search
 * resumed at a cursor that stops soon after it reads little more than it scanned (a single
 * open-ended read would fetch a whole backend chunk ahead), and a long scan costs a few
 * more reads, not more bytes.
 */
async function* readGrowing(
  source: WindowSource,
  offset: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array> {
  let at = offset;
  let span = firstResumeBytes;
  while (at < source.size) {
    const length = span > lastResumeBytes ? undefined : Math.min(span, source.size - at);
    const from = at;
    for await (const chunk of await source.read(at, length, signal)) {
      at += chunk.length;
      yield chunk;
    }
    if (length === undefined || at === from) return;
    span *= 2;
  }
}

/** The one segment of a search that reads on from its start (see blockSegments for the other). */
async function* wholeRead(
  source: WindowSource,
  start: { readonly offset: number; readonly firstLine: number },
  signal: AbortSignal | undefined,
): AsyncGenerator<SearchSegment> {
  yield {
    offset: start.offset,
    line: start.firstLine,
    chunks:
      start.offset === 0
        ? await source.read(0, undefined, signal)
        : readGrowing(source, start.offset, signal),
  };
}

/** Bytes of a chunk the lines are split from and matched in one CPU slice. */
const searchPieceBytes = 64 * 1024;

/** Matches per content frame. */
const matchesPerFrame = 64;

/** Copies the part of a scanned line needed to show it later (the view dies with its chunk). */
function keepLine(line: ScannedLine, displayBytes: number): KeptLine {
  const fits = line.head.length <= displayBytes;
  return {
    scanned: {
      index: line.index,
      start: line.start,
      head: Buffer.from(line.head.subarray(0, displayBytes)),
      complete: line.complete && fits,
      end: line.end,
    },
    shown: undefined,
  };
}

/** Shows a kept line once. */
function shownOf(kept: KeptLine, maxLineChars: number, stripAnsi: boolean): ShownLine {
  kept.shown ??= showLine(kept.scanned, maxLineChars, stripAnsi);
  return kept.shown;
}

/** Frame carrying finished matches. */
function matchesFrame(matches: readonly OpenMatch[]): ReadToolOutputResponse {
  return create(ReadToolOutputResponseSchema, {
    frame: {
      case: "content",
      value: {
        body: {
          case: "matches",
          value: {
            matches: matches.map((m) => ({
              line: toLineMessage(m.line),
              before: m.before.map(toLineMessage),
              after: m.after.map(toLineMessage),
            })),
          },
        },
      },
    },
  });
}

/**
 * searchWindow streams one search window: a header frame, content frames of finished matches
 * (each with up to contextLines lines before and after; context may overlap between matches)
 * and a trailer whose text shows the matches as `grep -n` does.
 *
 * Guarantees: lines are streamed with a ring of the previous contextLines lines, so memory is
 * bounded by the caps, not the payload; it skips `skip` matching lines, returns at most
 * min(maxMatches ?? 100, caps.maxMatches) and stops reading once that many are complete or
 * the rendered text would exceed maxWindowChars; `total_matches` is set, and `next_offset`
 * unset once nothing is left, only when the scan reached the end of the payload.
 *
 * With `after` (a cursor this function put in an earlier trailer's `search_cursor`, which
 * points at that window's last match) the frames are exactly those of the same request
 * without it; the scan starts at the cursor's line, re-reading only the context lines before
 * it, so paging through every match reads the payload about once. `clipped` is set when a cap
 * cut the window: the character cap, a request above caps.maxMatches, a shown line clipped at
 * maxLineChars, or a line past the skipped matches matched on its head only.
 *
 * A search from the start of a payload of at least `skipping.minBytes` whose matches all hold
 * some text (matcher.required) reads the head as usual, then asks the source which blocks hold
 * that text (findBlocks: threads of their own reading the file, where it is a local file) and
 * reads only the lines around them (blockSegments); the frames are exactly those of reading
 * every byte. The lines are matched in `slice`'s turns (CpuTurns), a chunk at a time.
 */
export async function* searchWindow(
  source: WindowSource,
  request: SearchRequest,
  matcher: LineMatcher,
  caps: WindowCaps,
  withText: boolean,
  signal?: AbortSignal,
  skipping: BlockSkipping = defaultBlockSkipping,
  slice: CpuSlice = unsliced,
): AsyncGenerator<ReadToolOutputResponse> {
  if (request.maxMatches !== undefined && request.maxMatches < 1) {
    throw new ConnectError(
      `max_matches must be at least 1, got ${request.maxMatches}`,
      Code.InvalidArgument,
    );
  }
  const maxMatches = Math.min(request.maxMatches ?? defaultMaxMatches, caps.maxMatches);
  const overCap = request.maxMatches !== undefined && request.maxMatches > caps.maxMatches;
  const context = Math.min(Math.max(0, request.contextLines), maxContextLines);
  const { skip } = request;
  const { maxLineChars, maxWindowChars } = caps;
  const strip = request.keepAnsi !== true;
  const displayBytes = lineKeepBytes(maxLineChars, strip);
  const start = await resolveSearchStart(source, request.after, skip, context, signal);
  const check = searchCursorCheck(source.payloadId, request);
  checkCursorTie(request.after, check);
  const describe = (count: number, total: number | undefined): SearchHeader => ({
    handle: source.handle,
    pattern: request.pattern,
    regex: request.regex,
    ignoreCase: request.ignoreCase,
    skip,
    count,
    total,
  });

  let seen = start.matchesBefore;
  let returned = 0;
  let returnedBytes = 0;
  let lastScanned = start.firstLine - 1;
  // The last match returned: the next window's cursor.
  let lastTaken: ShownLine | undefined;
  // 0-based number of the last line rendered, to print each line once and mark gaps.
  let lastShown = -1;
  let rows = "";
  let rowsChars = 0;
  let charClipped = false;
  // A shown line clipped at maxLineChars, or a scanned line matched on its head only.
  let lineClipped = false;
  // Bytes of a line the pattern is tested on: longer lines are matched on their head only.
  const keepBytes = Math.max(caps.maxSearchLineBytes, displayBytes);
  // Set once a line was matched on its head only: the footer then says so.
  let headOnlyBytes: number | undefined;
  const ring: KeptLine[] = [];
  const open: { match: OpenMatch; need: number }[] = [];
  let finished: OpenMatch[] = [];
  const frames: ReadToolOutputResponse[] = [];

  /** True when `extra` more characters of rows still leave room for header and footer. */
  const fits = (extra: number, count: number): boolean => {
    const header = renderSearchHeader(describe(count, Math.max(source.lineCount, skip + count)));
    const footer = widestSearchFooterChars(skip + count, overCap, caps, headOnlyBytes);
    return countChars(header) + rowsChars + extra + footer <= maxWindowChars;
  };
  /** Renders rows for `lines` after line `prev` (0-based), with `--` before each gap. */
  const renderRows = (lines: readonly { line: ShownLine; tag: ":" | "-" }[]): string => {
    let prev = lastShown;
    let text = "";
    for (const { line, tag } of lines) {
      const gap = context > 0 && prev >= 0 && line.number - 1 > prev + 1;
      text += (gap ? groupSeparator : "") + renderLineRow(line, maxLineChars, tag);
      prev = line.number - 1;
    }
    return text;
  };
  /** Appends rendered rows that end with `last`. */
  const show = (text: string, last: ShownLine): void => {
    rows += text;
    rowsChars += countChars(text);
    lastShown = last.number - 1;
  };
  /** Gives `line` to every open match still short of after-context. */
  const feedAfter = (line: ShownLine): void => {
    for (const entry of open) {
      if (entry.need > 0) {
        entry.match.after.push(line);
        entry.need--;
      }
    }
  };
  /** Hands matches whose after-context is complete on, in frames of matchesPerFrame. */
  const settle = (): void => {
    while (open[0] !== undefined && open[0].need === 0) {
      const done = open.shift();
      if (done !== undefined) finished.push(done.match);
    }
    if (finished.length >= matchesPerFrame) {
      frames.push(matchesFrame(finished));
      finished = [];
    }
  };

  /** Takes a line that is a returned match; false when the window has no room for it. */
  const takeMatch = (line: ScannedLine): boolean => {
    const shown = showLine(line, maxLineChars, strip);
    let before = ring.map((kept) => shownOf(kept, maxLineChars, strip));
    const group = (context: readonly ShownLine[]): string =>
      renderRows([
        ...context
          .filter((l) => l.number - 1 > lastShown)
          .map((l) => ({ line: l, tag: "-" as const })),
        { line: shown, tag: ":" },
      ]);
    let text = group(before);
    if (!fits(countChars(text), returned + 1)) {
      if (returned > 0) return false;
      // The first match is always shown: its farthest context gives way first.
      while (before.length > 0 && !fits(countChars(text), 1)) {
        before = before.slice(1);
        text = group(before);
      }
      charClipped = true;
    }
    show(text, shown);
    if (shown.clipped || before.some((l) => l.clipped)) lineClipped = true;
    feedAfter(shown);
    open.push({ match: { line: shown, before, after: [] }, need: context });
    lastTaken = shown;
    returned++;
    returnedBytes += shown.coveredBytes;
    return true;
  };

  /** Takes a line that is only context for open matches; false when it does not fit. */
  const takeContext = (line: ScannedLine): boolean => {
    const shown = showLine(line, maxLineChars, strip);
    const text = renderRows([{ line: shown, tag: "-" }]);
    if (!fits(countChars(text), returned)) return false;
    show(text, shown);
    if (shown.clipped) lineClipped = true;
    feedAfter(shown);
    return true;
  };

  /** Keeps a line in the ring of the last `context` lines. */
  const keepForContext = (line: ScannedLine): void => {
    if (context === 0) return;
    ring.push(keepLine(line, displayBytes));
    if (ring.length > context) ring.shift();
  };

  const onLine = (line: ScannedLine): boolean => {
    // Skipped lines leave a gap: lines kept from before it are no longer context.
    if (line.index !== lastScanned + 1) ring.length = 0;
    lastScanned = line.index;
    if (line.index < start.testFrom) {
      // Lines before a cursor are counted in it; they are read again only as context.
      keepForContext(line);
      return true;
    }
    const matched = matcher.test(line);
    if (matched) seen++;
    else if (!line.complete && seen >= skip) {
      // A line cut at keepBytes was matched on its head only: a match past it went unseen,
      // which the footer must say; when the window has no room left for that, it ends before
      // the line, so the next window (which starts after its last match) says it.
      if (headOnlyBytes === undefined) {
        headOnlyBytes = keepBytes;
        if (!fits(0, returned)) {
          headOnlyBytes = undefined;
          lastScanned = line.index - 1;
          charClipped = true;
          return false;
        }
      }
      lineClipped = true;
    }
    const wanted = matched && seen > skip && returned < maxMatches;
    const needed = open.some((entry) => entry.need > 0);
    if (wanted ? !takeMatch(line) : needed && !takeContext(line)) {
      charClipped = true;
      return false;
    }
    keepForContext(line);
    settle();
    return returned < maxMatches || open.length > 0;
  };

  yield windowHeaderFrame(source, 0);
  const { find } = matcher;
  const anchors = find === undefined ? undefined : source.lineAnchors(signal);
  const splitter = createLineSplitter({
    firstLine: start.firstLine,
    firstOffset: start.offset,
    skipUntil: start.firstLine,
    keepBytes,
    onLine,
    ...(find === undefined || anchors === undefined
      ? {}
      : {
          // Lines owed as after-context are never skipped.
          nextOfInterest: (chunk: Buffer, from: number) =>
            open.some((entry) => entry.need > 0) ? from : find(chunk, from),
          linesBefore: context,
          anchors,
        }),
  });
  let exhausted = true;
  let offset = start.offset;
  // The chunk the matcher and splitter work on; handed back to the source once they have
  // moved on (the splitter keeps no view of it, the matcher none past the next chunk).
  let current: Uint8Array | undefined;
  try {
    const { required } = matcher;
    const segments =
      required !== undefined &&
      anchors !== undefined &&
      request.after === undefined &&
      start.offset === 0 &&
      source.findBlocks !== undefined &&
      source.size >= skipping.minBytes &&
      // A segment takes one indexed line of context on each side: enough when lines are
      // indexed at least every `context` lines.
      (context === 0 || (await source.seekLine(context - 1, signal)).line === 0)
        ? blockSegments(source, required, context, skipping, signal, () => seen)
        : wholeRead(source, start, signal);
    reading: for await (const segment of segments) {
      if (segment.offset !== offset) {
        splitter.jump(segment.offset, segment.line);
        offset = segment.offset;
      }
      for await (const chunk of segment.chunks) {
        // A piece at a time, each in a slice of its own: a chunk of short lines, each tested
        // alone, took the event loop for most of a second.
        for (let at = 0; at < chunk.length; at += searchPieceBytes) {
          if (signal?.aborted) throw new ConnectError("window read was cancelled", Code.Canceled);
          const pause = slice.pause(signal);
          if (pause !== undefined) await pause;
          const piece = Buffer.from(
            chunk.buffer,
            chunk.byteOffset + at,
            Math.min(searchPieceBytes, chunk.length - at),
          );
          matcher.beginChunk(piece, offset);
          if (current !== chunk) {
            if (current !== undefined) source.release(current);
            current = chunk;
          }
          offset += piece.length;
          await anchors?.reach(offset);
          const more = splitter.push(piece);
          yield* frames.splice(0);
          if (!more) {
            exhausted = false;
            break reading;
          }
        }
      }
    }
    if (exhausted) splitter.finish();
  } finally {
    if (current !== undefined) source.release(current);
    await anchors?.close();
  }
  for (const entry of open) finished.push(entry.match);
  open.length = 0;
  yield* frames.splice(0);
  if (finished.length > 0) yield matchesFrame(finished);

  const scannedAll = exhausted || lastScanned >= source.lineCount - 1;
  const total = scannedAll ? seen : undefined;
  const next = scannedAll && skip + returned >= seen ? undefined : skip + returned;
  const countCapped = next !== undefined && !charClipped && overCap && returned === maxMatches;
  let rendered: string;
  if (returned === 0) {
    rendered = renderNoMatches(describe(0, seen), headOnlyBytes);
  } else {
    const footer = searchFooterOf(next, charClipped, countCapped, caps, headOnlyBytes);
    rendered = renderSearchHeader(describe(returned, total)) + rows + renderSearchFooter(footer);
  }
  yield create(ReadToolOutputResponseSchema, {
    frame: {
      case: "trailer",
      value: {
        returnedLines: BigInt(returned),
        returnedBytes: BigInt(returnedBytes),
        returnedMatches: BigInt(returned),
        nextOffset: next === undefined ? undefined : BigInt(next),
        clipped: charClipped || countCapped || lineClipped,
        eof: scannedAll,
        totalMatches: total === undefined ? undefined : BigInt(total),
        searchCursor:
          next === undefined || lastTaken === undefined
            ? undefined
            : {
                byteOffset: BigInt(lastTaken.byteOffset),
                line: BigInt(lastTaken.number - 1),
                matchesBefore: BigInt(skip + returned - 1),
                check,
              },
        rendered: withText ? clipString(rendered, maxWindowChars) : "",
      },
    },
  });
}
