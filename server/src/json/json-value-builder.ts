import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonEvents, JsonScalarKind } from "./json-events.js";
import type { JsonValue } from "./jsonpath-ast.js";

/** JsonSpan is where a built value and (for containers) each of its children lie in the payload. */
export interface JsonSpan {
  /** Offset of the value's first byte. */
  readonly start: number;
  /** Offset right after its last byte. */
  end: number;
  /** Element spans (array) or member spans by name (object; the last duplicate wins). */
  readonly kids?: JsonSpan[] | Map<string, JsonSpan>;
}

/** JsonValueBuilder turns the events of one JSON value into the value and its spans. */
export interface JsonValueBuilder extends JsonEvents {
  /** True once the value is complete. */
  readonly done: boolean;
  /** The value (once done). */
  readonly value: JsonValue;
  /** Its span tree (once done). */
  readonly span: JsonSpan;
}

/** A container being built. */
interface Open {
  readonly value: JsonValue[] | { [key: string]: JsonValue };
  readonly span: JsonSpan;
  key: string | undefined;
}

/** decodeJsonName decodes a member name's raw token (quotes and escapes included). */
export function decodeJsonName(raw: Uint8Array): string {
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  if (!text.includes(0x5c)) return text.toString("utf8", 1, raw.length - 1);
  return JSON.parse(text.toString("utf8")) as string;
}

/**
 * createJsonValueBuilder builds one JSON value in memory from its events, the first of which
 * is the value's own open or scalar event.
 *
 * Guarantees: memory grows with the value's bytes; once the value spans more than `maxBytes`
 * bytes of payload it throws RESOURCE_EXHAUSTED naming `why` (what needed the value whole), so
 * a query cannot buffer without bound. Objects are built without a prototype.
 */
export function createJsonValueBuilder(maxBytes: number, why: string): JsonValueBuilder {
  const stack: Open[] = [];
  let start = -1;
  let result: { value: JsonValue; span: JsonSpan } | undefined;
  let pieces: Uint8Array[] = [];
  let pieceBytes = 0;
  let scalarStart = -1;

  const check = (offset: number): void => {
    if (start < 0) start = offset;
    if (offset - start > maxBytes) {
      throw new ConnectError(
        `JSONPath query needs a value of more than ${maxBytes} bytes in memory (${why}), starting at byte ${start}; the server's bound is ${maxBytes} bytes`,
        Code.ResourceExhausted,
      );
    }
  };
  const place = (value: JsonValue, span: JsonSpan): void => {
    const parent = stack[stack.length - 1];
    if (parent === undefined) {
      result = { value, span };
      return;
    }
    if (Array.isArray(parent.value)) {
      parent.value.push(value);
      (parent.span.kids as JsonSpan[]).push(span);
    } else {
      const key = parent.key ?? "";
      Object.defineProperty(parent.value, key, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
      (parent.span.kids as Map<string, JsonSpan>).set(key, span);
    }
  };
  const open = (value: Open["value"], kids: JsonSpan["kids"], offset: number): void => {
    check(offset);
    stack.push({ value, span: { start: offset, end: offset, kids }, key: undefined });
  };
  const close = (offset: number): void => {
    check(offset);
    const done = stack.pop();
    if (done === undefined) return;
    done.span.end = offset + 1;
    place(done.value, done.span);
  };
  return {
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
      open(Object.create(null) as { [key: string]: JsonValue }, new Map(), offset);
    },
    openArray(offset) {
      open([], [], offset);
    },
    closeObject: close,
    closeArray: close,
    key(raw, offset) {
      check(offset);
      const top = stack[stack.length - 1];
      if (top !== undefined) top.key = decodeJsonName(raw);
    },
    scalar(kind: JsonScalarKind, raw, offset, last) {
      if (scalarStart < 0) scalarStart = offset;
      check(offset + raw.length);
      if (!last || pieces.length > 0) {
        pieces.push(Uint8Array.from(raw));
        pieceBytes += raw.length;
        if (!last) return;
      }
      const bytes = pieces.length > 0 ? Buffer.concat(pieces, pieceBytes) : raw;
      const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
      const value: JsonValue =
        kind === "string"
          ? (JSON.parse(text) as string)
          : kind === "number"
            ? Number(text)
            : kind === "null"
              ? null
              : kind === "true";
      place(value, { start: scalarStart, end: offset + raw.length });
      pieces = [];
      pieceBytes = 0;
      scalarStart = -1;
    },
  };
}
