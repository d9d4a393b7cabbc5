import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonEvents, JsonScalarKind } from "./json-events.js";
import { decodeJsonString } from "./json-string.js";
import type { JsonValue } from "./jsonpath-ast.js";

/** JsonSpan is where a built value and (for containers) each of its children lie in the payload. */
export interface JsonSpan {
  /** Offset of the value's first byte. */
  readonly start: number;
  /** Offset right after its last byte. */
  end: number;
  /** Element spans (array) or member spans by name (object, no prototype; the last duplicate wins). */
  readonly kids?: JsonSpan[] | { [key: string]: JsonSpan };
}

/** JsonValueBuilder turns the events of one JSON value into the value and its spans. */
export interface JsonValueBuilder extends JsonEvents {
  /** True once the value is complete. */
  readonly done: boolean;
  /** The value (once done). */
  readonly value: JsonValue;
  /** Its span tree (once done). */
  readonly span: JsonSpan;
  /**
   * Readies the builder for another value, with its own reason and projection: a scan holds
   * one candidate at a time, and building a builder per candidate was a large part of it.
   */
  reset(why: () => string, projection?: JsonProjection): void;
}

/**
 * JsonProjection names the parts of a value a consumer reads: the members and elements in
 * `kids` (each with its own projection), or everything below when `whole` is set.
 */
export interface JsonProjection {
  whole: boolean;
  readonly kids: Map<string | number, JsonProjection>;
}

/** A container being built. */
interface Open {
  readonly value: JsonValue[] | { [key: string]: JsonValue };
  readonly span: JsonSpan;
  /** What to build below it; undefined builds everything. */
  readonly projection: JsonProjection | undefined;
  key: string | undefined;
  index: number;
}

/**
 * createJsonValueBuilder builds one JSON value in memory from its events, the first of which
 * is the value's own open or scalar event.
 *
 * Guarantees: memory grows with the value's bytes; once the value spans more than `maxBytes`
 * bytes of payload it throws RESOURCE_EXHAUSTED naming `why()` (what needed the value whole,
 * asked only then: a scan builds a value per candidate and nearly never fails), so
 * a query cannot buffer without bound. Objects are built without a prototype. With a
 * `projection` only the parts it names are built (arrays keep their indices, with holes), and
 * only their spans recorded; the bound still counts every byte of the value.
 */
export function createJsonValueBuilder(
  maxBytes: number,
  initialWhy: () => string,
  initialProjection?: JsonProjection,
): JsonValueBuilder {
  let why = initialWhy;
  let projection = initialProjection;
  const stack: Open[] = [];
  // Depth inside a part the projection leaves out; -1 outside one.
  let skipDepth = -1;
  let skippingScalar = false;
  let start = -1;
  let result: { value: JsonValue; span: JsonSpan } | undefined;
  let pieces: Uint8Array[] = [];
  let pieceBytes = 0;
  let scalarStart = -1;

  const check = (offset: number): void => {
    if (start < 0) start = offset;
    if (offset - start > maxBytes) {
      throw new ConnectError(
        `JSONPath query needs a value of more than ${maxBytes} bytes in memory (${why()}), starting at byte ${start}; the server's bound is ${maxBytes} bytes`,
        Code.ResourceExhausted,
      );
    }
  };
  /**
   * Enters the next child of the innermost container: its projection, or null when the
   * projection leaves it out. Advances the container's element index.
   */
  const enter = (): JsonProjection | undefined | null => {
    const parent = stack[stack.length - 1];
    if (parent === undefined) return projection;
    const step: string | number = Array.isArray(parent.value) ? parent.index++ : (parent.key ?? "");
    const p = parent.projection;
    if (p === undefined || p.whole) return undefined;
    return p.kids.get(step) ?? null;
  };
  const place = (value: JsonValue, span: JsonSpan): void => {
    const parent = stack[stack.length - 1];
    if (parent === undefined) {
      result = { value, span };
      return;
    }
    if (Array.isArray(parent.value)) {
      const at = parent.index - 1;
      parent.value[at] = value;
      (parent.span.kids as JsonSpan[])[at] = span;
    } else {
      const key = parent.key ?? "";
      // Objects and their span maps have no prototype: `__proto__` is a plain member here.
      parent.value[key] = value;
      (parent.span.kids as { [key: string]: JsonSpan })[key] = span;
    }
  };
  const open = (array: boolean, offset: number): void => {
    check(offset);
    if (skipDepth >= 0) {
      skipDepth++;
      return;
    }
    const p = enter();
    if (p === null) {
      skipDepth = 1;
      return;
    }
    const value = array ? [] : (Object.create(null) as { [key: string]: JsonValue });
    const kids = array ? [] : (Object.create(null) as { [key: string]: JsonSpan });
    stack.push({
      value,
      span: { start: offset, end: offset, kids },
      projection: p,
      key: undefined,
      index: 0,
    });
  };
  const close = (offset: number): void => {
    check(offset);
    if (skipDepth >= 0) {
      skipDepth--;
      if (skipDepth === 0) skipDepth = -1;
      return;
    }
    const done = stack.pop();
    if (done === undefined) return;
    done.span.end = offset + 1;
    place(done.value, done.span);
  };
  return {
    reset(nextWhy, nextProjection) {
      why = nextWhy;
      projection = nextProjection;
      stack.length = 0;
      skipDepth = -1;
      skippingScalar = false;
      start = -1;
      result = undefined;
      pieces = [];
      pieceBytes = 0;
      scalarStart = -1;
    },
    get done() {
      return result !== undefined;
    },
    get value() {
      return result?.value ?? null;
    },
    get span() {
      return result?.span ?? { start: 0, end: 0 };
    },
    openObject(offset) {
      open(false, offset);
    },
    openArray(offset) {
      open(true, offset);
    },
    closeObject: close,
    closeArray: close,
    key(raw, offset) {
      check(offset);
      if (skipDepth >= 0) return;
      const top = stack[stack.length - 1];
      if (top !== undefined) top.key = decodeJsonString(raw);
    },
    scalar(kind: JsonScalarKind, raw, offset, last) {
      check(offset + raw.length);
      if (skipDepth >= 0) return;
      if (scalarStart < 0) {
        scalarStart = offset;
        skippingScalar = enter() === null;
        // A left-out scalar at the top completes the (empty) projection at once.
        if (skippingScalar && stack.length === 0) {
          result = { value: null, span: { start: offset, end: offset + raw.length } };
        }
      }
      if (skippingScalar) {
        if (last) {
          if (result !== undefined && stack.length === 0) result.span.end = offset + raw.length;
          scalarStart = -1;
          skippingScalar = false;
        }
        return;
      }
      if (!last || pieces.length > 0) {
        pieces.push(Uint8Array.from(raw));
        pieceBytes += raw.length;
        if (!last) return;
      }
      const bytes = pieces.length > 0 ? Buffer.concat(pieces, pieceBytes) : raw;
      let value: JsonValue;
      if (kind === "string") value = decodeJsonString(bytes);
      else if (kind === "number") {
        value = Number(
          Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1"),
        );
      } else value = kind === "null" ? null : kind === "true";
      place(value, { start: scalarStart, end: offset + raw.length });
      pieces = [];
      pieceBytes = 0;
      scalarStart = -1;
    },
  };
}
