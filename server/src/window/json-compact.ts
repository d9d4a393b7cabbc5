import { createJsonViewRenderer } from "../json/json-view-renderer.js";
import { clipString, countChars } from "./caps.js";
import type { WindowSource } from "./source.js";

/** CompactValue is a stored JSON value shown as compact JSON, clipped. */
export interface CompactValue {
  /** Compact JSON (no insignificant whitespace), at most maxChars code points. */
  readonly text: string;
  /** True when the value was longer than maxChars. */
  readonly clipped: boolean;
}

/**
 * readCompactJson reads the JSON value stored at bytes [offset, offset + length) and returns
 * it as compact JSON clipped to `maxChars` code points (strings and escapes kept as written):
 * the JSON Lines view's rendering of one record, resumed at the value.
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
  const parts: string[] = [];
  // The characters gathered so far, counting the brackets and commas records are joined with.
  let chars = records ? 1 : 0;
  let more = false;
  const renderer = createJsonViewRenderer({
    kind: "lines",
    checkpoint: { line: 0, offset, stack: [] },
    skipUntil: 0,
    maxLineChars: maxChars,
    onLine: (line) => {
      parts.push(line.text);
      chars += countChars(line.text) + (parts.length > 1 ? 1 : 0);
      more = line.clipped || chars > maxChars;
      return !more;
    },
  });
  let stopped = false;
  for await (const chunk of await source.read(offset, length, signal)) {
    stopped = !renderer.push(chunk);
    source.release(chunk);
    if (stopped) break;
  }
  if (!stopped) renderer.finish();
  const text = records ? `[${parts.join(",")}]` : parts.join(",");
  if (!more && chars + (records ? 1 : 0) <= maxChars) return { text, clipped: false };
  return { text: clipString(text, maxChars), clipped: true };
}
