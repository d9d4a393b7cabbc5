/** Keys an object sketch lists before summarising the rest. */
const MAX_KEYS = 20;

/** Longest sketch returned, in UTF-16 code units, including the closing ellipsis. */
const MAX_SHAPE_CHARS = 400;

/** Type names used in sketches; `mixed` only names arrays whose items differ. */
type JsonKind = "object" | "array" | "string" | "number" | "boolean" | "null";

function kindOf(value: unknown): JsonKind {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  switch (typeof value) {
    case "string":
      return "string";
    case "number":
    case "bigint":
      return "number";
    case "boolean":
      return "boolean";
    default:
      return "object";
  }
}

function countCodePoints(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A low surrogate after a high one belongs to the same code point.
    if (unit >= 0xdc00 && unit <= 0xdfff && i > 0) {
      const prev = text.charCodeAt(i - 1);
      if (prev >= 0xd800 && prev <= 0xdbff) continue;
    }
    count++;
  }
  return count;
}

function items(n: number): string {
  return n === 1 ? "1 item" : `${n} items`;
}

function quoteKeyIfNeeded(key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
}

function sketchObject(obj: Record<string, unknown>, depth: number): string {
  const keys = Object.keys(obj);
  const parts: string[] = [];
  for (const key of keys.slice(0, MAX_KEYS)) {
    parts.push(`${quoteKeyIfNeeded(key)}: ${sketch(obj[key], depth - 1, false)}`);
  }
  const more = keys.length > MAX_KEYS ? `, … ${keys.length - MAX_KEYS} more keys` : "";
  return `{${parts.join(", ")}${more}}`;
}

function sketchArray(arr: readonly unknown[], depth: number): string {
  if (depth <= 0 || arr.length === 0) return `[${items(arr.length)}]`;
  const first = kindOf(arr[0]);
  const common = arr.every((item) => kindOf(item) === first) ? first : "mixed";
  // An array and its items are one level: a list of records shows the first record's keys.
  const of = common === "object" ? sketchObject(arr[0] as Record<string, unknown>, depth) : common;
  return `[${items(arr.length)} of ${of}]`;
}

function sketch(value: unknown, depth: number, top: boolean): string {
  const kind = kindOf(value);
  if (kind === "array") return sketchArray(value as unknown[], depth);
  if (kind === "object") {
    return depth <= 0 ? "object" : sketchObject(value as Record<string, unknown>, depth);
  }
  if (kind === "string" && top) return `string (${countCodePoints(value as string)} chars)`;
  return kind;
}

/**
 * jsonShape returns a one-line sketch of a parsed JSON value's top level.
 *
 * Objects render as `{key: type, …}` in the value's own key order (for `JSON.parse` output that
 * is document order, except that integer-like keys come first, as JavaScript orders them), with
 * at most 20 keys then `, … N more keys`; arrays as `[N items of T]`, T being the items' common
 * type (`object`, `string`, `number`, `boolean`, `null`, `array`) or `mixed`, and an array of
 * objects showing the first item's keys. `depth` is how many levels are sketched (default 1):
 * below it objects are named `object` and arrays `[N items]`. A top-level string shows its
 * length in code points. The result is deterministic, contains no line breaks (keys that are not
 * plain identifiers are JSON-quoted) and is at most 400 characters, ending in `…` when cut.
 */
export function jsonShape(value: unknown, depth = 1): string {
  const full = sketch(value, depth, true);
  if (full.length <= MAX_SHAPE_CHARS) return full;
  let cut = MAX_SHAPE_CHARS - 1;
  // Keep surrogate pairs whole.
  const last = full.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  return `${full.slice(0, cut)}…`;
}
