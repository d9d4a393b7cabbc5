/**
 * The byte units a size option accepts, by exact spelling. IEC units are powers of 1024, SI
 * units powers of 1000. `K`, `M`, `KB`, `Gb` and the like are not here: each is read one way by
 * some tools and the other way by others, so the option refuses them instead of guessing.
 */
const BYTE_UNITS: Readonly<Record<string, bigint>> = {
  "": 1n,
  B: 1n,
  kB: 1000n,
  MB: 1000n ** 2n,
  GB: 1000n ** 3n,
  TB: 1000n ** 4n,
  KiB: 1024n,
  MiB: 1024n ** 2n,
  GiB: 1024n ** 3n,
  TiB: 1024n ** 4n,
};

/** The duration units a milliseconds option accepts; a plain number is milliseconds. */
const DURATION_UNITS: Readonly<Record<string, bigint>> = {
  "": 1n,
  ms: 1n,
  s: 1000n,
  m: 60_000n,
  h: 3_600_000n,
  d: 86_400_000n,
};

/** What {@link parseSize} accepts, for messages and the usage text. */
export const SIZE_SYNTAX =
  "a whole number of bytes, or a number with one of B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 10GiB or 1.5MB";

/** What {@link parseDuration} accepts, for messages and the usage text. */
export const DURATION_SYNTAX =
  "a whole number of milliseconds, or a number with one of ms, s, m (minutes), h, d, e.g. 30s or 1.5m";

/**
 * scaled reads `raw` as a decimal number (digits, optionally a point and more digits) followed
 * by an optional space and one of `units`, and returns it times the unit. It throws an Error
 * that says what was wrong (in words, without the option's name) when the text is not of that
 * form, the unit is not one of `units`, the product is not whole, or it exceeds
 * Number.MAX_SAFE_INTEGER. The arithmetic is exact (BigInt), so `0.1kB` is 100, not 100.00000000000001.
 */
function scaled(
  raw: string,
  units: Readonly<Record<string, bigint>>,
  what: { readonly unit: string; readonly syntax: string },
): number {
  const match = /^([0-9]+)(?:\.([0-9]+))?(?: ?([A-Za-z]+))?$/.exec(raw);
  if (match === null) throw new Error(`expected ${what.syntax}`);
  const [, whole = "", fraction = "", unit = ""] = match;
  const factor = Object.hasOwn(units, unit) ? units[unit] : undefined;
  if (factor === undefined) {
    throw new Error(`unknown unit ${JSON.stringify(unit)}; expected ${what.syntax}`);
  }
  const scale = 10n ** BigInt(fraction.length);
  const numerator = BigInt(whole + fraction) * factor;
  if (numerator % scale !== 0n) {
    throw new Error(`not a whole number of ${what.unit}`);
  }
  const value = numerator / scale;
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new Error(`more than ${Number.MAX_SAFE_INTEGER} ${what.unit}`);
  }
  return Number(value);
}

/**
 * parseSize reads a byte count as an operator writes it: `1048576`, `512B`, `10GiB` (10 × 1024³),
 * `10GB` (10 × 1000³), `1.5MiB`, `10 GiB`. Units are case-sensitive and exactly those of
 * {@link SIZE_SYNTAX}. It returns a safe integer, or throws an Error saying in words what is
 * wrong: not a number, an ambiguous or unknown unit, a fraction of a byte, too large.
 */
export function parseSize(raw: string): number {
  return scaled(raw, BYTE_UNITS, { unit: "bytes", syntax: SIZE_SYNTAX });
}

/**
 * parseDuration reads a duration in milliseconds: a plain number is milliseconds (`5000`), and
 * `250ms`, `30s`, `1.5m`, `2h`, `1d` say their unit. It returns a safe integer, or throws an
 * Error saying in words what is wrong.
 */
export function parseDuration(raw: string): number {
  return scaled(raw, DURATION_UNITS, { unit: "milliseconds", syntax: DURATION_SYNTAX });
}

/** parseWholeNumber reads decimal digits as a safe integer; anything else throws an Error in words. */
export function parseWholeNumber(raw: string): number {
  const n = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new Error("expected a whole number");
  return n;
}
