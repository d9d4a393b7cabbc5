import { clipString, countChars } from "./caps.js";
import type { WindowSource } from "./source.js";

/** CompactValue is a stored JSON value shown as compact JSON, clipped. */
export interface CompactValue {
  /** Compact JSON (no insignificant whitespace), at most maxChars code points. */
  readonly text: string;
  /** True when the value was longer than maxChars. */
  readonly clipped: boolean;
}

const space = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) space[c] = 1;

/**
 * readCompactJson reads the JSON value stored at bytes [offset, offset + length) and returns
 * it as compact JSON clipped to `maxChars` code points (strings and escapes kept as written).
 *
 * Guarantees: it stops reading once it has enough for maxChars, so a huge value costs
 * O(maxChars), not O(length). With `records` the range is JSON Lines and is shown as the
 * array of its records (`[r1,r2]`), the way a query sees it.
 */
export async function readCompactJson(
  source: WindowSource,
  offset: number,
  length: number,
  maxChars: number,
  records: boolean,
  signal?: AbortSignal,
): Promise<CompactValue> {
  // A code point is at most 4 bytes: this many compact bytes always hold maxChars + 1.
  const want = maxChars * 4 + 4;
  const out = Buffer.alloc(Math.min(want, length + 2));
  let used = 0;
  let inString = false;
  let escaped = false;
  let depth = 0;
  let gap = false;
  let seen = false;
  let more = false;
  const put = (byte: number): void => {
    if (used < out.length) out[used++] = byte;
    else more = true;
  };
  if (records) put(0x5b);
  for await (const chunk of await source.read(offset, length, signal)) {
    for (let i = 0; i < chunk.length && !more; i++) {
      const b = chunk[i] ?? 0;
      if (inString) {
        put(b);
        if (escaped) escaped = false;
        else if (b === 0x5c) escaped = true;
        else if (b === 0x22) inString = false;
        continue;
      }
      if (space[b] === 1) {
        if (records && depth === 0 && seen) gap = true;
        continue;
      }
      if (records && depth === 0 && gap) put(0x2c);
      gap = false;
      seen = true;
      if (b === 0x22) inString = true;
      else if (b === 0x7b || b === 0x5b) depth++;
      else if (b === 0x7d || b === 0x5d) depth--;
      put(b);
    }
    source.release(chunk);
    if (more) break;
  }
  if (records) put(0x5d);
  const text = out.toString("utf8", 0, used);
  if (!more && countChars(text) <= maxChars) return { text, clipped: false };
  return { text: clipString(text, maxChars), clipped: true };
}
