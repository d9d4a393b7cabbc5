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
 * as `ls -l` and `kubectl get` do.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? "").length)));
  return all
    .map((row) =>
      row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  "),
    )
    .join("\n")
    .concat("\n");
}
