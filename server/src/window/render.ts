import { countChars } from "./caps.js";

/**
 * The exact model-facing text of every window. Every function here is pure: the same
 * arguments render to the same string (no clocks, no locale, plain-digit numbers), so prompt
 * caches stay warm and every runtime shows the model the same bytes.
 */

/** RowLine is what a rendered row needs to know about one line. */
export interface RowLine {
  /** 1-based line number. */
  readonly number: number;
  /** The line's text, already clipped. */
  readonly text: string;
  /** True when the text was clipped at maxLineChars. */
  readonly clipped: boolean;
  /** Byte offset right after the shown part of a clipped line. */
  readonly continuesAt: number;
}

/** RowTag marks a row: none for lines mode (`cat -n`), `:` for a match and `-` for context (`grep -n`). */
export type RowTag = "" | ":" | "-";

/** groupSeparator separates non-adjacent groups of search results, as `grep -C` does. */
export const groupSeparator = "--\n";

/**
 * renderLineRow renders one numbered line: the number right-aligned in 6 columns, the tag, a
 * tab, the text and, for a clipped line, the marker saying where the line continues.
 */
export function renderLineRow(line: RowLine, maxLineChars: number, tag: RowTag = ""): string {
  const marker = line.clipped
    ? ` [… line clipped at ${maxLineChars} chars; it continues at byte ${line.continuesAt}: read bytes offset=${line.continuesAt}]`
    : "";
  return `${String(line.number).padStart(6)}${tag}\t${line.text}${marker}\n`;
}

/**
 * lineRowChars returns the code points of `row`, the row renderLineRow made of `line`. Nothing
 * in a row but the line's text can hold a surrogate pair (digits, tag, tab, marker and newline
 * are one UTF-16 unit each, and the text cannot pair with what surrounds it), so only the text
 * is counted: a flat string, where counting the row itself would first flatten the
 * concatenation.
 */
export function lineRowChars(row: string, line: RowLine): number {
  return row.length - line.text.length + countChars(line.text);
}

/** renderLinesHeader renders the first line of a lines window (first and last are 1-based). */
export function renderLinesHeader(
  handle: string,
  first: number,
  last: number,
  totalLines: number,
  size: number,
): string {
  return `[${handle}] lines ${first}-${last} of ${totalLines} (${size} bytes)\n`;
}

/** LinesFooter says how a lines window ended. */
export type LinesFooter =
  | { readonly kind: "more"; readonly next: number }
  | { readonly kind: "earlier"; readonly next: number }
  | {
      readonly kind: "clipped";
      readonly next: number;
      readonly fromEnd: boolean;
      readonly maxWindowChars: number;
    }
  | {
      readonly kind: "capped";
      readonly next: number;
      readonly fromEnd: boolean;
      readonly maxWindowLines: number;
    }
  | { readonly kind: "end" }
  | { readonly kind: "start" };

/** renderLinesFooter renders the last line of a lines window: how to ask for the next one. */
export function renderLinesFooter(footer: LinesFooter): string {
  switch (footer.kind) {
    case "more":
      return `[more: offset=${footer.next}]\n`;
    case "earlier":
      return `[earlier lines: offset=${footer.next} from_end=true]\n`;
    case "clipped":
      return footer.fromEnd
        ? `[window clipped at ${footer.maxWindowChars} chars; earlier lines: offset=${footer.next} from_end=true]\n`
        : `[window clipped at ${footer.maxWindowChars} chars; more: offset=${footer.next}]\n`;
    case "capped":
      return footer.fromEnd
        ? `[window capped at ${footer.maxWindowLines} lines; earlier lines: offset=${footer.next} from_end=true]\n`
        : `[window capped at ${footer.maxWindowLines} lines; more: offset=${footer.next}]\n`;
    case "end":
      return "[end of output]\n";
    case "start":
      return "[no earlier lines]\n";
  }
}

/** renderNoLines renders a lines window that selected nothing. */
export function renderNoLines(handle: string, offset: number, totalLines: number): string {
  return `[${handle}] no lines at offset ${offset}: the output has ${totalLines} lines\n`;
}

/**
 * escapeControls writes every control character (C0, DEL, C1: line breaks and ESC included)
 * as `\uXXXX`, so a field the caller declared can neither break a line of model text nor
 * carry a terminal escape sequence into it.
 */
export function escapeControls(text: string): string {
  return text.replace(
    /\p{Cc}/gu,
    (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`,
  );
}

/** renderBinary renders a lines or search window over a binary payload. */
export function renderBinary(handle: string, size: number, contentType: string): string {
  const type = contentType === "" ? "application/octet-stream" : escapeControls(contentType);
  return `[${handle}] binary output (${size} bytes, ${type}); read it with bytes=true\n`;
}

/** renderBytesHeader renders the first line of a bytes window ([start, end) in bytes). */
export function renderBytesHeader(
  handle: string,
  start: number,
  end: number,
  size: number,
): string {
  return `[${handle}] bytes ${start}-${end} of ${size}\n`;
}

/** BytesFooter says how a bytes window ended. */
export type BytesFooter =
  | { readonly kind: "more"; readonly next: number }
  | { readonly kind: "clipped"; readonly next: number; readonly maxWindowChars: number }
  | { readonly kind: "capped"; readonly next: number; readonly maxBytesWindow: number }
  | { readonly kind: "end" };

/** renderBytesFooter renders the end of a bytes window, on a line of its own. */
export function renderBytesFooter(footer: BytesFooter): string {
  switch (footer.kind) {
    case "more":
      return `\n[more: bytes offset=${footer.next}]\n`;
    case "clipped":
      return `\n[rendering clipped at ${footer.maxWindowChars} chars; more: bytes offset=${footer.next}]\n`;
    case "capped":
      return `\n[window capped at ${footer.maxBytesWindow} bytes; more: bytes offset=${footer.next}]\n`;
    case "end":
      return "\n[end of output]\n";
  }
}

/** renderNoBytes renders a bytes window that selected nothing. */
export function renderNoBytes(handle: string, offset: number, size: number): string {
  return `[${handle}] no bytes at offset ${offset}: the output has ${size} bytes\n`;
}

/** hexLineBytes is the number of bytes one hex dump line shows. */
export const hexLineBytes = 16;

/**
 * renderHexLine renders up to 16 bytes as one `xxd` line (no newline): the offset in 8+ hex
 * digits, 2-byte hex groups padded to full width, two spaces, then printable ASCII or `.`.
 */
export function renderHexLine(offset: number, bytes: Uint8Array): string {
  let hex = "";
  let ascii = "";
  for (let i = 0; i < hexLineBytes; i++) {
    const b = bytes[i];
    if (i > 0 && i % 2 === 0) hex += " ";
    if (b === undefined) {
      hex += "  ";
      continue;
    }
    hex += b.toString(16).padStart(2, "0");
    ascii += b >= 0x20 && b <= 0x7e ? String.fromCharCode(b) : ".";
  }
  return `${offset.toString(16).padStart(8, "0")}: ${hex}  ${ascii}`;
}

/** SearchHeader describes a search window for its first line. */
export interface SearchHeader {
  readonly handle: string;
  readonly pattern: string;
  readonly regex: boolean;
  readonly ignoreCase: boolean;
  /** Matches skipped before the first one shown. */
  readonly skip: number;
  /** Matches shown. */
  readonly count: number;
  /** Matches in the whole payload, when the search scanned all of it. */
  readonly total: number | undefined;
}

/** describeSearch renders how a pattern is matched: `"pat" (literal)`, `"pat" (regex, ignore case)`. */
function describeSearch(h: SearchHeader): string {
  return `${JSON.stringify(h.pattern)} (${h.regex ? "regex" : "literal"}${h.ignoreCase ? ", ignore case" : ""})`;
}

/** renderSearchHeader renders the first line of a search window that has matches. */
export function renderSearchHeader(h: SearchHeader): string {
  const total = h.total === undefined ? "" : ` of ${h.total}`;
  return `[${h.handle}] matches ${h.skip + 1}-${h.skip + h.count} for ${describeSearch(h)}${total}\n`;
}

/**
 * renderNoMatches renders a whole search window without matches; after a skip it says how
 * many matches the payload holds in all.
 */
export function renderNoMatches(h: SearchHeader, headOnlyBytes?: number): string {
  const first =
    h.skip > 0
      ? `[${h.handle}] no matches after skip=${h.skip} for ${describeSearch(h)} (${h.total ?? 0} in all)\n`
      : `[${h.handle}] no matches for ${JSON.stringify(h.pattern)}\n`;
  return `${first}${renderSearchFooter({ kind: "end", ...(headOnlyBytes === undefined ? {} : { headOnlyBytes }) })}`;
}

/**
 * SearchFooter says how a search window ended. `clippedAt` on the end: the character cap cut
 * context lines of the last match; `headOnlyBytes`: a line longer than that was searched on
 * its first `headOnlyBytes` bytes only, so a match past them went unseen.
 */
export type SearchFooter = (
  | { readonly kind: "more"; readonly next: number }
  | { readonly kind: "clipped"; readonly next: number; readonly maxWindowChars: number }
  | { readonly kind: "capped"; readonly next: number; readonly maxMatches: number }
  | { readonly kind: "end"; readonly clippedAt?: number }
) & { readonly headOnlyBytes?: number };

/**
 * searchFooterOf says how a window of matches (search, JSONPath nodes) that goes on to `next`
 * (undefined: nothing follows) ended: clipped by the character cap, capped by the match cap, or
 * simply with more to read; `headOnlyBytes` as in SearchFooter.
 */
export function searchFooterOf(
  next: number | undefined,
  charClipped: boolean,
  countCapped: boolean,
  caps: { readonly maxWindowChars: number; readonly maxMatches: number },
  headOnlyBytes?: number,
): SearchFooter {
  const note = headOnlyBytes === undefined ? {} : { headOnlyBytes };
  if (next === undefined) {
    return charClipped
      ? { kind: "end", clippedAt: caps.maxWindowChars, ...note }
      : { kind: "end", ...note };
  }
  if (charClipped) return { kind: "clipped", next, maxWindowChars: caps.maxWindowChars, ...note };
  if (countCapped) return { kind: "capped", next, maxMatches: caps.maxMatches, ...note };
  return { kind: "more", next, ...note };
}

/**
 * widestSearchFooterChars is the length, in characters, of the widest footer a window of
 * matches going on to `next` may end with: the character-cap footer, or the match-cap one when
 * the request asked for more matches than the cap (`overCap`), with the head-only note when
 * `headOnlyBytes` is set.
 */
export function widestSearchFooterChars(
  next: number,
  overCap: boolean,
  caps: { readonly maxWindowChars: number; readonly maxMatches: number },
  headOnlyBytes?: number,
): number {
  const note = headOnlyBytes === undefined ? {} : { headOnlyBytes };
  const clipped = renderSearchFooter({
    kind: "clipped",
    next,
    maxWindowChars: caps.maxWindowChars,
    ...note,
  });
  const capped = overCap
    ? renderSearchFooter({ kind: "capped", next, maxMatches: caps.maxMatches, ...note })
    : "";
  return Math.max(countChars(clipped), countChars(capped));
}

/** footerBody is the footer's text inside its brackets, without the head-only note. */
function footerBody(footer: SearchFooter): string {
  switch (footer.kind) {
    case "more":
      return `more matches: skip=${footer.next}`;
    case "clipped":
      return `window clipped at ${footer.maxWindowChars} chars; more matches: skip=${footer.next}`;
    case "capped":
      return `window capped at ${footer.maxMatches} matches; more matches: skip=${footer.next}`;
    case "end":
      return footer.clippedAt === undefined
        ? "no more matches"
        : `window clipped at ${footer.clippedAt} chars; no more matches`;
  }
}

/**
 * renderSearchFooter renders the last line of a search window: how to ask for more matches,
 * and which cap cut the window (`[window clipped at 50000 chars; no more matches]` when
 * context lines of the last match were left out; `…; lines over N bytes were searched in
 * their first N only]` when a match past a long line's head could not be seen).
 */
export function renderSearchFooter(footer: SearchFooter): string {
  const note =
    footer.headOnlyBytes === undefined
      ? ""
      : `; lines over ${footer.headOnlyBytes} bytes were searched in their first ${footer.headOnlyBytes} only`;
  return `[${footerBody(footer)}${note}]\n`;
}

/** What the header of a JSON window calls the view it shows. */
function jsonViewName(kind: "document" | "lines"): string {
  return kind === "document"
    ? "JSON view (pretty-printed)"
    : "JSON Lines view (one record per line)";
}

/** renderJsonViewHeader renders the first line of a JSON window (first and last are 1-based). */
export function renderJsonViewHeader(
  handle: string,
  kind: "document" | "lines",
  first: number,
  last: number,
  viewLines: number,
  size: number,
): string {
  return `[${handle}] ${jsonViewName(kind)} lines ${first}-${last} of ${viewLines} (${size} bytes)\n`;
}

/**
 * renderJsonViewFooter renders the last line of a JSON window: the lines footer, its offsets
 * named as offsets of the JSON view.
 */
export function renderJsonViewFooter(footer: LinesFooter): string {
  switch (footer.kind) {
    case "more":
      return `[more: json offset=${footer.next}]\n`;
    case "earlier":
      return `[earlier lines: json offset=${footer.next} from_end=true]\n`;
    case "clipped":
      return footer.fromEnd
        ? `[window clipped at ${footer.maxWindowChars} chars; earlier lines: json offset=${footer.next} from_end=true]\n`
        : `[window clipped at ${footer.maxWindowChars} chars; more: json offset=${footer.next}]\n`;
    case "capped":
      return footer.fromEnd
        ? `[window capped at ${footer.maxWindowLines} lines; earlier lines: json offset=${footer.next} from_end=true]\n`
        : `[window capped at ${footer.maxWindowLines} lines; more: json offset=${footer.next}]\n`;
    case "end":
      return "[end of output]\n";
    case "start":
      return "[no earlier lines]\n";
  }
}

/** renderNoJsonViewLines renders a JSON window that selected nothing. */
export function renderNoJsonViewLines(
  handle: string,
  kind: "document" | "lines",
  offset: number,
  viewLines: number,
): string {
  return `[${handle}] no lines at offset ${offset}: the ${jsonViewName(kind)} has ${viewLines} lines\n`;
}
