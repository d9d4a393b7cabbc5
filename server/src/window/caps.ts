import { Code, ConnectError } from "@connectrpc/connect";

/**
 * WindowCaps bound every model-facing window, whatever the client asks.
 *
 * "Characters" are Unicode code points everywhere in the window engine.
 */
export interface WindowCaps {
  /** Lines per lines-mode window (and the default limit). */
  readonly maxWindowLines: number;
  /** Code points of rendered text per window, header and footer included. */
  readonly maxWindowChars: number;
  /** Code points of one line before the clipping marker. */
  readonly maxLineChars: number;
  /** Matches per search window; never above `maxMatchesHardCap`. */
  readonly maxMatches: number;
  /** Bytes per bytes-mode window. */
  readonly maxBytesWindow: number;
  /** Bytes of one line a search pattern is matched against; longer lines match on their head. */
  readonly maxSearchLineBytes: number;
}

/** maxMatchesHardCap is the most matches any search window may return, whatever the config. */
export const maxMatchesHardCap = 1000;

/** defaultMaxMatches is the number of matches a search window returns when none is asked. */
export const defaultMaxMatches = 100;

/** defaultWindowCaps are the caps a server uses unless its operator configures others. */
export const defaultWindowCaps: WindowCaps = Object.freeze({
  maxWindowLines: 1000,
  maxWindowChars: 50_000,
  maxLineChars: 2000,
  maxMatches: defaultMaxMatches,
  maxBytesWindow: 4 * 1024 ** 3,
  maxSearchLineBytes: 8 * 1024 ** 2,
});

/**
 * createWindowCaps returns `defaultWindowCaps` with `overrides` applied.
 *
 * Guarantees every cap is a positive safe integer, `maxMatches` is at most
 * `maxMatchesHardCap`, and a window can hold at least one whole clipped line; anything else is
 * refused with INVALID_ARGUMENT.
 */
export function createWindowCaps(overrides: Partial<WindowCaps> = {}): WindowCaps {
  const caps: WindowCaps = { ...defaultWindowCaps, ...overrides };
  for (const [name, value] of Object.entries(caps)) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new ConnectError(
        `window cap ${name} must be a positive integer, got ${value}`,
        Code.InvalidArgument,
      );
    }
  }
  if (caps.maxMatches > maxMatchesHardCap) {
    throw new ConnectError(
      `window cap maxMatches must be at most ${maxMatchesHardCap}, got ${caps.maxMatches}`,
      Code.InvalidArgument,
    );
  }
  if (caps.maxWindowChars < caps.maxLineChars + 4096) {
    throw new ConnectError(
      `window cap maxWindowChars (${caps.maxWindowChars}) must exceed maxLineChars by at least 4096`,
      Code.InvalidArgument,
    );
  }
  return Object.freeze(caps);
}

/** A UTF-16 unit that may start a surrogate pair. */
const highSurrogate = /[\uD800-\uDBFF]/;

/** countChars returns the number of code points in `text` (a surrogate pair counts once). */
export function countChars(text: string): number {
  // Most text holds no pair: one native scan says so. Walking the units in JavaScript was a
  // large share of rendering a window, whose rows are strings built by concatenation.
  if (!highSurrogate.test(text)) return text.length;
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
}

/**
 * clipString returns the first `maxChars` code points of `text`; it never leaves a lone
 * surrogate behind.
 */
export function clipString(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  let units = 0;
  for (let chars = 0; chars < maxChars && units < text.length; chars++) {
    const unit = text.charCodeAt(units);
    const next = text.charCodeAt(units + 1);
    const pair = unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff;
    units += pair ? 2 : 1;
  }
  return text.slice(0, units);
}

/** Byte length a UTF-8 lead byte announces; 1 for a byte that cannot start a sequence. */
function sequenceLength(lead: number): number {
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  return 1;
}

/** Utf8Clip is where a byte string was cut and how many code points its kept part holds. */
export interface Utf8Clip {
  /** Bytes kept, always on a character boundary. */
  readonly end: number;
  /** Code points in the kept bytes. */
  readonly chars: number;
}

/**
 * clipUtf8 returns the longest prefix of `bytes` holding at most `maxChars` code points that
 * ends on a character boundary: it never splits a multi-byte sequence, and a sequence cut off
 * by the end of `bytes` is left out. Invalid bytes count as one character each, as a decoder
 * replaces them.
 */
export function clipUtf8(bytes: Uint8Array, maxChars: number): Utf8Clip {
  let i = 0;
  let chars = 0;
  while (i < bytes.length && chars < maxChars) {
    const want = sequenceLength(bytes[i] ?? 0);
    let len = 1;
    while (len < want && i + len < bytes.length && ((bytes[i + len] ?? 0) & 0xc0) === 0x80) len++;
    if (len < want && i + len === bytes.length) break;
    i += len;
    chars++;
  }
  return { end: i, chars };
}

/**
 * leadingContinuationBytes returns how many bytes (at most 3) of a character cut off at the
 * start of `bytes` precede its first character boundary.
 */
export function leadingContinuationBytes(bytes: Uint8Array): number {
  let i = 0;
  while (i < 3 && i < bytes.length && ((bytes[i] ?? 0) & 0xc0) === 0x80) i++;
  return i;
}
