/**
 * Terminal escape sequences: where they start and end in model-facing text. One grammar for
 * the server (over UTF-8 bytes) and the TypeScript SDK (over strings); the Python SDK
 * implements the same rules and both read the shared vectors in
 * conformance/ansi-strip-vectors.json.
 *
 * The rules (docs/design/ansi-strip.md):
 * - CSI: `ESC [` or U+009B, then any characters 0x20–0x3F, then a final 0x40–0x7E.
 * - Strings: OSC (`ESC ]`, U+009D), DCS (`ESC P`, U+0090), SOS (`ESC X`, U+0098), PM
 *   (`ESC ^`, U+009E) and APC (`ESC _`, U+009F), up to and including a terminator: BEL,
 *   ST (`ESC \`) or U+009C.
 * - Other ESC sequences: `ESC`, any intermediates 0x20–0x2F, then a final 0x30–0x7E (`ESC 7`,
 *   `ESC (B`, `ESC c`, a lone `ESC \`). A lone U+009C is removed too.
 * - A sequence cut short ends right before what cut it, which stays text: a character outside
 *   its grammar (for CSI and other ESC sequences), a line feed or an ESC that does not start
 *   ST (for strings), the end of the text, or its 4096th code point (every sequence is at most
 *   4096 code points, so an unterminated OSC never swallows more than that and never crosses
 *   a line). A lone ESC is a sequence of one.
 * - Other control characters (C0, DEL and the other C1 controls) are not sequences.
 */

/** maxAnsiSequenceChars is the longest sequence in code points; a longer one is cut there. */
export const maxAnsiSequenceChars = 4096;

/** AnsiUnits is text as the scanner reads it: code units, with C1 controls and code points. */
export interface AnsiUnits {
  /** Code units in the text. */
  readonly length: number;
  /** The code unit at `i` (a byte, or a UTF-16 unit). */
  unit(i: number): number;
  /** The C1 control (0x80–0x9F) whose encoding starts at `i`, or -1. */
  c1(i: number): number;
  /** Code units one C1 control takes (2 in UTF-8, 1 in UTF-16). */
  readonly c1Width: number;
  /** True when the unit at `i` starts a code point (for the 4096 code point cap). */
  startsChar(i: number): boolean;
}

/** AnsiSequence is one sequence: [start, end) in code units. */
export interface AnsiSequence {
  /** Code unit right after the sequence. */
  readonly end: number;
  /** True when the end of the text cut it short (more of it may follow in the payload). */
  readonly cutByEnd: boolean;
}

const esc = 0x1b;
const bel = 0x07;
const lineFeed = 0x0a;
const backslash = 0x5c;
const st = 0x9c;

function isStringIntroducer(unit: number): boolean {
  // ] P X ^ _
  return unit === 0x5d || unit === 0x50 || unit === 0x58 || unit === 0x5e || unit === 0x5f;
}

function isC1StringIntroducer(code: number): boolean {
  return code === 0x9d || code === 0x90 || code === 0x98 || code === 0x9e || code === 0x9f;
}

/** Counts the code points in [from, to). */
function charsBetween(u: AnsiUnits, from: number, to: number): number {
  let n = 0;
  for (let k = from; k < to; k++) if (u.startsChar(k)) n++;
  return n;
}

/** The CSI body from `p` (after the introducer) of a sequence that started at `start`. */
function csiEnd(u: AnsiUnits, start: number, p: number): AnsiSequence {
  let chars = charsBetween(u, start, p);
  for (let k = p; k < u.length; k++) {
    if (u.startsChar(k) && ++chars > maxAnsiSequenceChars) return { end: k, cutByEnd: false };
    const x = u.unit(k);
    if (x >= 0x20 && x <= 0x3f) continue;
    if (x >= 0x40 && x <= 0x7e) return { end: k + 1, cutByEnd: false };
    return { end: k, cutByEnd: false };
  }
  return { end: u.length, cutByEnd: true };
}

/** The body of a string sequence from `p` (after the introducer) that started at `start`. */
function stringEnd(u: AnsiUnits, start: number, p: number): AnsiSequence {
  let chars = charsBetween(u, start, p);
  for (let k = p; k < u.length; k++) {
    if (u.startsChar(k) && ++chars > maxAnsiSequenceChars) return { end: k, cutByEnd: false };
    const x = u.unit(k);
    if (x === bel) return { end: k + 1, cutByEnd: false };
    if (x === lineFeed) return { end: k, cutByEnd: false };
    if (x === esc) {
      if (k + 1 >= u.length) return { end: u.length, cutByEnd: true };
      return u.unit(k + 1) === backslash && chars < maxAnsiSequenceChars
        ? { end: k + 2, cutByEnd: false }
        : { end: k, cutByEnd: false };
    }
    if (u.c1(k) === st) return { end: k + u.c1Width, cutByEnd: false };
  }
  return { end: u.length, cutByEnd: true };
}

/**
 * ansiSequenceAt returns the sequence starting at code unit `i`, or undefined when none does
 * (only ESC and the C1 controls CSI, OSC, DCS, SOS, PM, APC and ST start one).
 */
export function ansiSequenceAt(u: AnsiUnits, i: number): AnsiSequence | undefined {
  const first = u.unit(i);
  if (first === esc) {
    if (i + 1 >= u.length) return { end: u.length, cutByEnd: true };
    const next = u.unit(i + 1);
    if (next === 0x5b) return csiEnd(u, i, i + 2);
    if (isStringIntroducer(next)) return stringEnd(u, i, i + 2);
    if (next >= 0x20 && next <= 0x2f) {
      let chars = 2;
      for (let k = i + 2; k < u.length; k++) {
        if (u.startsChar(k) && ++chars > maxAnsiSequenceChars) return { end: k, cutByEnd: false };
        const x = u.unit(k);
        if (x >= 0x20 && x <= 0x2f) continue;
        return { end: x >= 0x30 && x <= 0x7e ? k + 1 : k, cutByEnd: false };
      }
      return { end: u.length, cutByEnd: true };
    }
    if (next >= 0x30 && next <= 0x7e) return { end: i + 2, cutByEnd: false };
    return { end: i + 1, cutByEnd: false };
  }
  const code = u.c1(i);
  if (code < 0) return undefined;
  if (code === 0x9b) return csiEnd(u, i, i + u.c1Width);
  if (isC1StringIntroducer(code)) return stringEnd(u, i, i + u.c1Width);
  if (code === st) return { end: i + u.c1Width, cutByEnd: false };
  return undefined;
}

/** stringUnits reads a JavaScript string as UTF-16 code units. */
function stringUnits(text: string): AnsiUnits {
  return {
    length: text.length,
    unit: (i) => text.charCodeAt(i),
    c1: (i) => {
      const c = text.charCodeAt(i);
      return c >= 0x80 && c <= 0x9f ? c : -1;
    },
    c1Width: 1,
    startsChar: (i) => {
      const c = text.charCodeAt(i);
      if (c < 0xdc00 || c > 0xdfff || i === 0) return true;
      const prev = text.charCodeAt(i - 1);
      return prev < 0xd800 || prev > 0xdbff;
    },
  };
}

/** byteUnits reads UTF-8 bytes; a C1 control is its two-byte encoding 0xC2 0x80–0x9F. */
export function byteUnits(bytes: Uint8Array): AnsiUnits {
  return {
    length: bytes.length,
    unit: (i) => bytes[i] ?? 0,
    c1: (i) => {
      if (bytes[i] !== 0xc2) return -1;
      const next = bytes[i + 1] ?? 0;
      return next >= 0x80 && next <= 0x9f ? next : -1;
    },
    c1Width: 2,
    startsChar: (i) => ((bytes[i] ?? 0) & 0xc0) !== 0x80,
  };
}

/**
 * startsAnsiSequence is true for the characters a sequence can start with: ESC and the C1
 * controls DCS, SOS, CSI, ST, OSC, PM and APC (0x90, 0x98, 0x9B–0x9F). In UTF-8 a C1 control
 * is 0xC2 followed by its code.
 */
export function startsAnsiSequence(code: number): boolean {
  return code === esc || code === 0x90 || code === 0x98 || (code >= 0x9b && code <= 0x9f);
}

/** Characters that may start a sequence in a string (startsAnsiSequence). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding escape introducers is the point
const mayStart = /[\u001b\u0090\u0098\u009b-\u009f]/;

/** hasAnsi is true when `text` may hold a sequence (an ESC or a C1 introducer). */
export function hasAnsi(text: string): boolean {
  return mayStart.test(text);
}

/**
 * stripAnsi returns `text` without its terminal escape sequences, by the rules above; text
 * without ESC or a C1 introducer is returned as is.
 */
export function stripAnsi(text: string): string {
  if (!hasAnsi(text)) return text;
  const u = stringUnits(text);
  let out = "";
  let kept = 0;
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    const seq = startsAnsiSequence(c) ? ansiSequenceAt(u, i) : undefined;
    if (seq === undefined) {
      i++;
      continue;
    }
    out += text.slice(kept, i);
    i = seq.end;
    kept = i;
  }
  return out + text.slice(kept);
}
