/**
 * JsonEvents receives a JSON text as a stream of structural events, in document order, from
 * a streaming tokenizer that never holds the whole text: the JSON view's indexer and renderer
 * and the JSONPath evaluator are both written against it.
 *
 * Offsets are byte offsets in the payload. Byte views passed to a callback are valid only
 * during that call (the tokenizer may reuse their memory afterwards); a consumer that needs
 * them later copies them.
 */
export interface JsonEvents {
  /** `{` at `offset`. */
  openObject(offset: number): void;
  /** `}` at `offset`. */
  closeObject(offset: number): void;
  /** `[` at `offset`. */
  openArray(offset: number): void;
  /** `]` at `offset`. */
  closeArray(offset: number): void;
  /**
   * A member name: `raw` is the name's token as written, quotes and escapes included, starting
   * at `offset`. Names are delivered whole (the tokenizer bounds their length).
   */
  key(raw: Uint8Array, offset: number): void;
  /**
   * A scalar value (a string with its quotes and escapes as written, a number, `true`,
   * `false` or `null`) starting at `offset`. A long string arrives in several consecutive
   * calls, each a further piece of its raw bytes at `offset` of that piece, `last` set on the
   * final one; every other scalar arrives in one call with `last` set.
   */
  scalar(kind: JsonScalarKind, raw: Uint8Array, offset: number, last: boolean): void;
}

/** JsonScalarKind is the kind of a scalar token. */
export type JsonScalarKind = "string" | "number" | "true" | "false" | "null";
