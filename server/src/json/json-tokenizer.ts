import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonEvents } from "./json-events.js";

/**
 * JsonTokenizer checks a JSON text against RFC 8259 while it streams in, in chunks split at
 * any byte, and reports its structure to a JsonEvents consumer.
 */
export interface JsonTokenizer {
  /**
   * Feeds the next chunk. Throws a JsonSyntaxError (naming the byte offset and the reason) at
   * the first byte that cannot continue a valid text; the tokenizer is then unusable. The
   * chunk is not retained after the call.
   */
  write(chunk: Uint8Array): void;
  /**
   * Ends the text: throws a JsonSyntaxError when it is incomplete (no value, an open string,
   * container or literal). A number at the very end is delivered here.
   */
  end(): void;
  /** Top-level values completed so far. */
  readonly values: number;
  /** Sequence mode: a line break was seen inside a top-level value. */
  readonly spansLines: boolean;
  /** Sequence mode: a top-level value started on the line where another ended. */
  readonly sharesLine: boolean;
}

/** A container on the tokenizer's stack: 1 for an object, 2 for an array. */
export type JsonContainer = 1 | 2;

/** jsonObject marks an object on a container stack. */
export const jsonObject: JsonContainer = 1;
/** jsonArray marks an array on a container stack. */
export const jsonArray: JsonContainer = 2;

/** JsonTokenizerOptions say what a tokenizer accepts, what it delivers and where it starts. */
export interface JsonTokenizerOptions {
  /**
   * Accept JSON Lines instead of one document: any number of top-level values, each on a line
   * of its own (a `\n` between two values, none inside one; blank lines allowed).
   */
  readonly lines?: boolean;
  /**
   * Accept any sequence of top-level values and report, instead of failing, whether one spans
   * lines (spansLines) or two share one (sharesLine): one pass then tells a document from
   * JSON Lines. Ignored when `lines` is set.
   */
  readonly sequence?: boolean;
  /**
   * Set false for a consumer that needs only the structure and offsets (an indexer): every
   * `raw` is then an empty array, which spares an allocation per token. Literals still arrive
   * as their constant bytes.
   */
  readonly bytes?: boolean;
  /**
   * Start in the middle of a text that was checked before: at byte `offset`, which is where
   * a member, an element, a top-level value or the close of a container starts (right after
   * the `{`, `[` or `,` before it and any whitespace), inside the containers of `stack`
   * (outermost first). Event offsets then count from `offset`.
   */
  readonly resume?: { readonly offset: number; readonly stack: ArrayLike<JsonContainer> };
}

/** The raw bytes handed to a consumer that asked for none. */
const noBytes = new Uint8Array(0);

/**
 * jsonMaxDepth is the nesting bound: deeper documents are not treated as JSON (RFC 8259
 * section 9 lets a parser set this limit).
 */
export const jsonMaxDepth = 1024;
/** The bound on a member name in bytes, quotes included (it is delivered whole). */
const maxKeyBytes = 65536;
/** The bound on a number token in bytes (it is delivered whole). */
const maxNumberBytes = 4096;
const maxDepth = jsonMaxDepth;

/** JsonSyntaxError is the FAILED_PRECONDITION a tokenizer throws for text that is not JSON. */
export type JsonSyntaxError = ConnectError & {
  /** Byte offset of the offending byte (the end of the text for a truncated one). */
  readonly jsonOffset: number;
  /** What is wrong, for example `trailing comma`. */
  readonly jsonReason: string;
};

/** jsonSyntaxError builds the error for `reason` at byte `offset`. */
function jsonSyntaxError(reason: string, offset: number): JsonSyntaxError {
  // The stack says nothing about bad data and costs more than the rest of a small offload's
  // JSON check: offload meets one of these for nearly every payload that is not JSON.
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  let created: ConnectError;
  try {
    created = new ConnectError(`not JSON: ${reason} at byte ${offset}`, Code.FailedPrecondition);
  } finally {
    Error.stackTraceLimit = limit;
  }
  const error = created as ConnectError & { jsonOffset: number; jsonReason: string };
  error.jsonOffset = offset;
  error.jsonReason = reason;
  return error;
}

/** isJsonSyntaxError tells a tokenizer's syntax error from any other error. */
export function isJsonSyntaxError(error: unknown): error is JsonSyntaxError {
  return (
    error instanceof ConnectError &&
    typeof (error as Partial<JsonSyntaxError>).jsonOffset === "number"
  );
}

// Parser states. A value state accepts any value; the others name what they accept.
const S_VALUE = 0; // a value (after `:`, after `,` in an array, at the top level)
const S_VALUE_OR_CLOSE = 1; // right after `[`
const S_KEY_OR_CLOSE = 2; // right after `{`
const S_KEY = 3; // after `,` in an object
const S_COLON = 4; // after a member name
const S_AFTER = 5; // after a value: `,`, a close, or (top level) the end
const S_STRING = 6; // inside a string
const S_ESCAPE = 7; // after `\` in a string
const S_UNICODE = 8; // inside `\uXXXX`
const S_UTF8 = 9; // inside a multi-byte UTF-8 sequence in a string
const S_NUMBER = 10; // inside a number
const S_LITERAL = 11; // inside true, false or null
const S_DONE = 12; // after the only top-level value
const S_SEP = 13; // JSON Lines: after a value, before the `\n` ending its line

// Number sub-states: which part of `-? int frac? exp?` was read last.
const N_MINUS = 0;
const N_ZERO = 1;
const N_INT = 2;
const N_DOT = 3;
const N_FRAC = 4;
const N_E = 5;
const N_ESIGN = 6;
const N_EXP = 7;

const literals = [
  new TextEncoder().encode("true"),
  new TextEncoder().encode("false"),
  new TextEncoder().encode("null"),
];
const literalKinds = ["true", "false", "null"] as const;

// Bytes that may follow `\` in a string.
const escapable = new Uint8Array(256);
for (const c of '"\\/bfnrtu') escapable[c.charCodeAt(0)] = 1;
const hex = new Uint8Array(256);
for (const c of "0123456789abcdefABCDEF") hex[c.charCodeAt(0)] = 1;

/**
 * createJsonTokenizer returns a tokenizer delivering `events` for the text written to it.
 *
 * Guarantees: the events and errors do not depend on how the text is chunked; memory beyond
 * the container stack and one bounded member-name or number buffer is constant (string values
 * are delivered as pieces of the caller's chunks, split wherever a chunk ends, possibly inside
 * an escape or a UTF-8 sequence); the text is accepted exactly when it is RFC 8259 JSON within
 * the depth, name and number bounds (strings valid UTF-8 with no raw control characters, no
 * byte order mark, no leading zeros, no trailing commas; escaped lone surrogates are accepted
 * as JSON.parse does).
 */
export function createJsonTokenizer(
  events: JsonEvents,
  options: JsonTokenizerOptions = {},
): JsonTokenizer {
  const lines = options.lines === true;
  const withBytes = options.bytes !== false;
  const sequence = !lines && options.sequence === true;
  const many = lines || sequence;
  let spansLines = false;
  let sharesLine = false;

  const stack = new Uint8Array(maxDepth + 1);
  let depth = 0;
  let state = S_VALUE;
  let base = 0; // offset of the current chunk's byte 0
  let values = 0;
  let failed = false;

  // Token in progress across chunks.
  let tokenStart = 0; // offset of the token's first byte
  let isKey = false; // the string being read is a member name
  let pieceStarted = false; // a piece of the current string value was delivered
  let unicodeLeft = 0;
  let utf8Left = 0;
  let utf8Lo = 0x80;
  let utf8Hi = 0xbf;
  let numberState = N_MINUS;
  let literal = 0;
  let literalAt = 0;
  // Carried bytes of a member name or number split across chunks.
  let carry = new Uint8Array(256);
  let carryLength = 0;

  if (options.resume !== undefined) {
    const resumeStack = options.resume.stack;
    if (resumeStack.length > maxDepth) throw jsonSyntaxError("nesting too deep", 0);
    for (let i = 0; i < resumeStack.length; i++) stack[i + 1] = resumeStack[i] as number;
    depth = resumeStack.length;
    base = options.resume.offset;
    state = depth === 0 ? S_VALUE : stack[depth] === jsonObject ? S_KEY_OR_CLOSE : S_VALUE_OR_CLOSE;
  }

  const fail = (reason: string, at: number): never => {
    failed = true;
    throw jsonSyntaxError(reason, at);
  };

  const appendCarry = (
    chunk: Uint8Array,
    from: number,
    to: number,
    limit: number,
    what: string,
  ) => {
    const need = carryLength + (to - from);
    if (need > limit) fail(`${what} longer than ${limit} bytes`, tokenStart);
    if (need > carry.length) {
      const grown = new Uint8Array(Math.max(need, carry.length * 2));
      grown.set(carry.subarray(0, carryLength));
      carry = grown;
    }
    carry.set(chunk.subarray(from, to), carryLength);
    carryLength = need;
  };

  /** State after a complete value at the current depth. */
  const afterValue = () => {
    if (depth === 0) {
      values++;
      return many ? S_SEP : S_DONE;
    }
    return S_AFTER;
  };

  const numberEnd = (chunk: Uint8Array, i: number, tokenFrom: number): number => {
    if (
      numberState === N_MINUS ||
      numberState === N_DOT ||
      numberState === N_E ||
      numberState === N_ESIGN
    ) {
      fail("incomplete number", base + i);
    }
    if (carryLength > 0) {
      appendCarry(chunk, tokenFrom, i, maxNumberBytes, "number");
      events.scalar("number", withBytes ? carry.slice(0, carryLength) : noBytes, tokenStart, true);
      carryLength = 0;
    } else {
      if (i - tokenFrom > maxNumberBytes)
        fail(`number longer than ${maxNumberBytes} bytes`, tokenStart);
      events.scalar("number", withBytes ? chunk.subarray(tokenFrom, i) : noBytes, tokenStart, true);
    }
    return afterValue();
  };

  const write = (input: Uint8Array) => {
    if (failed) throw jsonSyntaxError("tokenizer already failed", base);
    // Tokens are cut from a plain view of the chunk: a Buffer's subarray goes through its
    // species constructor, which cost more than the tokenizing itself on a scan of a payload.
    const chunk =
      input.constructor === Uint8Array
        ? input
        : new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    const n = chunk.length;
    let i = 0;
    // Where the token in progress starts inside this chunk (0 when it began in an earlier one).
    let tokenFrom = 0;
    let s = state;
    while (i < n) {
      let b = chunk[i] as number;
      switch (s) {
        case S_STRING: {
          // The hot loop: plain printable ASCII.
          while (b >= 0x20 && b !== 0x22 && b !== 0x5c && b < 0x80) {
            if (++i === n) break;
            b = chunk[i] as number;
          }
          if (i === n) break;
          if (b === 0x22) {
            i++;
            if (isKey) {
              if (carryLength > 0) {
                appendCarry(chunk, tokenFrom, i, maxKeyBytes, "member name");
                events.key(withBytes ? carry.slice(0, carryLength) : noBytes, tokenStart);
                carryLength = 0;
              } else {
                if (i - tokenFrom > maxKeyBytes)
                  fail(`member name longer than ${maxKeyBytes} bytes`, tokenStart);
                events.key(withBytes ? chunk.subarray(tokenFrom, i) : noBytes, tokenStart);
              }
              s = S_COLON;
            } else {
              events.scalar(
                "string",
                withBytes ? chunk.subarray(tokenFrom, i) : noBytes,
                pieceStarted ? base + tokenFrom : tokenStart,
                true,
              );
              s = afterValue();
            }
          } else if (b === 0x5c) {
            i++;
            s = S_ESCAPE;
          } else if (b < 0x20) {
            fail("control character in string", base + i);
          } else {
            // A UTF-8 lead byte: how many continuation bytes and the range of the first.
            if (b >= 0xc2 && b <= 0xdf) {
              utf8Left = 1;
              utf8Lo = 0x80;
              utf8Hi = 0xbf;
            } else if (b >= 0xe0 && b <= 0xef) {
              utf8Left = 2;
              utf8Lo = b === 0xe0 ? 0xa0 : 0x80;
              utf8Hi = b === 0xed ? 0x9f : 0xbf;
            } else if (b >= 0xf0 && b <= 0xf4) {
              utf8Left = 3;
              utf8Lo = b === 0xf0 ? 0x90 : 0x80;
              utf8Hi = b === 0xf4 ? 0x8f : 0xbf;
            } else {
              fail("invalid UTF-8", base + i);
            }
            i++;
            s = S_UTF8;
          }
          break;
        }
        case S_UTF8: {
          if (b < utf8Lo || b > utf8Hi) fail("invalid UTF-8", base + i);
          utf8Lo = 0x80;
          utf8Hi = 0xbf;
          i++;
          if (--utf8Left === 0) s = S_STRING;
          break;
        }
        case S_ESCAPE: {
          if (escapable[b] !== 1) fail("invalid escape", base + i);
          i++;
          if (b === 0x75) {
            unicodeLeft = 4;
            s = S_UNICODE;
          } else {
            s = S_STRING;
          }
          break;
        }
        case S_UNICODE: {
          if (hex[b] !== 1) fail("invalid \\u escape", base + i);
          i++;
          if (--unicodeLeft === 0) s = S_STRING;
          break;
        }
        case S_NUMBER: {
          // Digits are the common case; the sub-state checks the grammar.
          for (;;) {
            if (b >= 0x30 && b <= 0x39) {
              if (numberState === N_ZERO) fail("leading zero in number", base + i);
              if (numberState === N_MINUS) numberState = b === 0x30 ? N_ZERO : N_INT;
              else if (numberState === N_DOT) numberState = N_FRAC;
              else if (numberState === N_E || numberState === N_ESIGN) numberState = N_EXP;
            } else if (b === 0x2e) {
              if (numberState !== N_ZERO && numberState !== N_INT) fail("invalid number", base + i);
              numberState = N_DOT;
            } else if (b === 0x65 || b === 0x45) {
              if (numberState !== N_ZERO && numberState !== N_INT && numberState !== N_FRAC) {
                fail("invalid number", base + i);
              }
              numberState = N_E;
            } else if (b === 0x2b || b === 0x2d) {
              if (numberState !== N_E) fail("invalid number", base + i);
              numberState = N_ESIGN;
            } else {
              break;
            }
            if (++i === n) break;
            b = chunk[i] as number;
          }
          if (i === n) break;
          s = numberEnd(chunk, i, tokenFrom);
          break; // the terminating byte is handled by the next state
        }
        case S_LITERAL: {
          const word = literals[literal] as Uint8Array;
          if (b !== word[literalAt]) fail("invalid literal", base + i);
          i++;
          if (++literalAt === word.length) {
            events.scalar(literalKinds[literal] as "true", word, tokenStart, true);
            s = afterValue();
          }
          break;
        }
        default: {
          // Between tokens.
          if (b === 0x20 || b === 0x0d || b === 0x09) {
            i++;
            break;
          }
          if (b === 0x0a) {
            if (many) {
              if (s === S_SEP) s = S_VALUE;
              else if (depth > 0 || s !== S_VALUE) {
                if (lines) fail("a JSON Lines record spans lines", base + i);
                spansLines = true;
              }
            }
            i++;
            break;
          }
          const at = base + i;
          if (s === S_DONE) fail("more than one top-level value", at);
          if (s === S_SEP) {
            if (lines) fail("more than one value on a line", at);
            sharesLine = true;
            s = S_VALUE;
          }
          if (s === S_COLON) {
            if (b !== 0x3a) fail("expected ':'", at);
            i++;
            s = S_VALUE;
            break;
          }
          if (s === S_AFTER) {
            if (b === 0x2c) {
              i++;
              s = stack[depth] === jsonObject ? S_KEY : S_VALUE;
              break;
            }
            if (b === 0x7d || b === 0x5d) {
              if ((b === 0x7d) !== (stack[depth] === jsonObject)) fail("mismatched close", at);
            } else {
              fail(stack[depth] === jsonObject ? "expected ',' or '}'" : "expected ',' or ']'", at);
            }
          }
          if (b === 0x7d) {
            if (s !== S_KEY_OR_CLOSE && s !== S_AFTER) {
              fail(s === S_KEY ? "trailing comma" : "unexpected '}'", at);
            }
            i++;
            depth--;
            events.closeObject(at);
            s = afterValue();
            break;
          }
          if (b === 0x5d) {
            if (s !== S_VALUE_OR_CLOSE && s !== S_AFTER) {
              fail(
                s === S_VALUE && stack[depth] === jsonArray && depth > 0
                  ? "trailing comma"
                  : "unexpected ']'",
                at,
              );
            }
            i++;
            depth--;
            events.closeArray(at);
            s = afterValue();
            break;
          }
          if (s === S_KEY || s === S_KEY_OR_CLOSE) {
            if (b !== 0x22) fail("expected a member name", at);
            tokenStart = at;
            tokenFrom = i;
            isKey = true;
            i++;
            s = S_STRING;
            break;
          }
          // S_VALUE or S_VALUE_OR_CLOSE: a value starts here.
          tokenStart = at;
          tokenFrom = i;
          if (b === 0x22) {
            isKey = false;
            pieceStarted = false;
            i++;
            s = S_STRING;
          } else if (b === 0x7b || b === 0x5b) {
            if (depth === maxDepth) fail(`nesting deeper than ${maxDepth}`, at);
            i++;
            depth++;
            if (b === 0x7b) {
              stack[depth] = jsonObject;
              events.openObject(at);
              s = S_KEY_OR_CLOSE;
            } else {
              stack[depth] = jsonArray;
              events.openArray(at);
              s = S_VALUE_OR_CLOSE;
            }
          } else if ((b >= 0x30 && b <= 0x39) || b === 0x2d) {
            numberState = b === 0x2d ? N_MINUS : b === 0x30 ? N_ZERO : N_INT;
            i++;
            s = S_NUMBER;
          } else if (b === 0x74 || b === 0x66 || b === 0x6e) {
            literal = b === 0x74 ? 0 : b === 0x66 ? 1 : 2;
            literalAt = 1;
            i++;
            s = S_LITERAL;
          } else if (b === 0x2c) {
            fail("unexpected ','", at);
          } else {
            fail(b === 0xef && base + i === 0 ? "byte order mark" : "unexpected byte", at);
          }
        }
      }
    }
    // The chunk ends inside a token: keep what the next chunk needs.
    if (s === S_STRING || s === S_ESCAPE || s === S_UNICODE || s === S_UTF8) {
      if (isKey) {
        appendCarry(chunk, tokenFrom, n, maxKeyBytes, "member name");
      } else if (n > tokenFrom) {
        events.scalar(
          "string",
          withBytes ? chunk.subarray(tokenFrom, n) : noBytes,
          pieceStarted ? base + tokenFrom : tokenStart,
          false,
        );
        pieceStarted = true;
      }
    } else if (s === S_NUMBER) {
      appendCarry(chunk, tokenFrom, n, maxNumberBytes, "number");
    }
    state = s;
    base += n;
  };

  return {
    write,
    end() {
      if (failed) throw jsonSyntaxError("tokenizer already failed", base);
      if (state === S_NUMBER) {
        state = numberEnd(new Uint8Array(0), 0, 0);
      }
      const complete =
        depth === 0 &&
        (state === S_DONE || state === S_SEP || (many && state === S_VALUE)) &&
        (values > 0 || options.resume !== undefined);
      if (!complete) {
        const reason =
          state === S_STRING || state === S_ESCAPE || state === S_UNICODE || state === S_UTF8
            ? "unterminated string"
            : state === S_LITERAL
              ? "incomplete literal"
              : depth > 0
                ? "unclosed container"
                : "no value";
        fail(reason, base);
      }
    },
    get values() {
      return values;
    },
    get spansLines() {
      return spansLines;
    },
    get sharesLine() {
      return sharesLine;
    },
  };
}
