import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** formatBytes renders a byte count for people: `512 B`, `1.5 KiB`, `3.00 GiB` (binary units). */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${value} B`;
  return `${value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0)} ${UNITS[unit]}`;
}

/** formatSeconds renders a duration for people: `42s`, `3m05s`, `2h07m`. */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** isoTime is a protobuf timestamp as ISO 8601 (UTC), or null when unset. */
export function isoTime(t: Timestamp | undefined): string | null {
  return t === undefined ? null : timestampDate(t).toISOString();
}

/** humanTime is a timestamp as `2026-12-01 21:20:03Z` for tables, or `-` when unset. */
export function humanTime(t: Timestamp | undefined): string {
  const iso = isoTime(t);
  return iso === null ? "-" : `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z`;
}

const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/**
 * parseDuration reads a TTL as whole seconds: `3600`, `90s`, `15m`, `2h`, `7d`, `1w` or a sum
 * such as `1h30m`. Undefined when `text` is none of these or is zero.
 */
export function parseDuration(text: string): number | undefined {
  if (/^[0-9]+$/.test(text)) {
    const n = Number(text);
    return Number.isSafeInteger(n) && n > 0 ? n : undefined;
  }
  if (!/^([0-9]+[smhdw])+$/.test(text)) return undefined;
  let seconds = 0;
  for (const [, n = "", unit = ""] of text.matchAll(/([0-9]+)([smhdw])/g)) {
    seconds += Number(n) * (DURATION_UNITS[unit] ?? 0);
  }
  return Number.isSafeInteger(seconds) && seconds > 0 ? seconds : undefined;
}

/**
 * table lays out rows under a header in columns two spaces apart, the last column unpadded,
 * as `ls -l` and `kubectl get` do; a cell's control characters are shown escaped (visible).
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows.map((row) => row.map((cell) => visible(cell)))];
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? "").length)));
  return all
    .map((row) =>
      row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  "),
    )
    .join("\n")
    .concat("\n");
}

// C0 controls, DEL, C1 controls (U+0080 to U+009F, CSI and OSC among them) and the bidirectional
// overrides and isolates, which reorder what a terminal shows.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROLS_BUT_TAB = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// What JSON.stringify leaves raw in a string (it escapes only U+0000 to U+001F).
const JSON_RAW_CONTROLS = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const escapeControl = (c: string): string => {
  const code = c.charCodeAt(0);
  return code < 0x80
    ? `\\x${code.toString(16).padStart(2, "0")}`
    : `\\u${code.toString(16).padStart(4, "0")}`;
};

/**
 * visible shows `text` for a terminal: every control character a terminal could act on (C0, DEL,
 * C1, bidi overrides) as `\x1b` or `\u009b`, so a name, id or line someone else stored cannot
 * move the cursor, retitle the window or clear the screen. With `keepTab`, tabs stay.
 */
export function visible(text: string, keepTab = false): string {
  return text.replace(keepTab ? CONTROLS_BUT_TAB : CONTROLS, escapeControl);
}

/**
 * jsonLine is `value` as one line of JSON whose every control character is escaped (`\u009b`
 * where JSON.stringify leaves C1, DEL and bidi overrides raw); it parses back to `value`.
 */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value).replace(JSON_RAW_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}\n`;
}
