/**
 * Pure formatting helpers of the inspector: no DOM, so they are unit-tested under Node.
 */

/** formatBytes renders a byte count with a binary unit (`1.5 MiB`), exact below 1 KiB. */
export function formatBytes(bytes: bigint | number): string {
  const n = Number(bytes);
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/**
 * codeName turns a Connect code's enum name (`InvalidArgument`) into the gRPC status name
 * people search for (`INVALID_ARGUMENT`).
 */
export function codeName(enumName: string): string {
  return enumName.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** One row of a hex dump: the offset, 16 bytes as hex in two groups of 8, their ASCII. */
export interface HexRow {
  /** The row's first byte offset, 8 hex digits or more. */
  readonly offset: string;
  /** The bytes as two-digit hex, a wider gap after the eighth. */
  readonly hex: string;
  /** Printable ASCII as itself, every other byte as `.`. */
  readonly ascii: string;
}

/** hexRows splits `bytes`, which start at byte `start` of the output, into 16-byte rows. */
export function hexRows(bytes: Uint8Array, start: bigint): HexRow[] {
  const rows: HexRow[] = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const chunk = bytes.subarray(i, i + 16);
    const hex = Array.from(chunk, (b, j) => (j === 8 ? " " : "") + b.toString(16).padStart(2, "0"))
      .join(" ")
      .padEnd(48, " ");
    const ascii = Array.from(chunk, (b) =>
      b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".",
    ).join("");
    rows.push({ offset: (start + BigInt(i)).toString(16).padStart(8, "0"), hex, ascii });
  }
  return rows;
}

/** A piece of a line: text, and whether the search matched it. */
export interface Segment {
  readonly text: string;
  readonly match: boolean;
}

/** What a search looked for, as the server was asked. */
export interface SearchSpec {
  readonly pattern: string;
  readonly regex: boolean;
  readonly ignoreCase: boolean;
}

/**
 * highlightSegments splits `text` into the parts the search matched and the rest, in order,
 * covering the whole text. A regex is matched with the browser's engine, which agrees with RE2
 * on the syntax both share; a pattern it cannot compile leaves the line whole and unmarked
 * (the server still said the line matched).
 */
export function highlightSegments(text: string, spec: SearchSpec): Segment[] {
  if (spec.pattern === "") return [{ text, match: false }];
  let re: RegExp;
  try {
    const source = spec.regex ? spec.pattern : spec.pattern.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    re = new RegExp(source, spec.ignoreCase ? "giu" : "gu");
  } catch {
    return [{ text, match: false }];
  }
  const segments: Segment[] = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    const at = m.index ?? 0;
    if (m[0].length === 0) continue;
    if (at > last) segments.push({ text: text.slice(last, at), match: false });
    segments.push({ text: m[0], match: true });
    last = at + m[0].length;
  }
  if (last < text.length || segments.length === 0) {
    segments.push({ text: text.slice(last), match: false });
  }
  return segments;
}

/** isJsonType tells whether a declared content type is JSON (`application/json`, `*+json`). */
export function isJsonType(contentType: string): boolean {
  const base = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  return base === "application/json" || base.endsWith("+json") || base === "text/json";
}

/**
 * prettyJson parses `text` and re-indents it by two spaces; a text that is not JSON throws
 * a SyntaxError naming the problem.
 */
export function prettyJson(text: string): string {
  return JSON.stringify(JSON.parse(text), null, 2);
}

/**
 * Control characters (C0 but tab, DEL, C1) and the Unicode bidirectional formatting characters
 * (marks, embeddings, overrides, isolates).
 */
const invisible =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * visibleText shows every control character and bidi formatting character of `text` as its
 * code point (`<U+202E>`), so a name or run id cannot read as something else: a right-to-left
 * override would make "\u202Egnp.exe" read as "exe.png" and reverse whatever follows it on the
 * line, and a terminal escape would be invisible. Every other character is kept.
 */
export function visibleText(text: string): string {
  return text.replace(
    invisible,
    (c) => `<U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}>`,
  );
}
