import type { JsonEvents } from "./json-events.js";
import { createJsonTokenizer, type JsonTokenizer } from "./json-tokenizer.js";
import type { JsonCheckpoint, JsonViewKind } from "./json-view-index.js";

/** JsonViewLine is one line of the JSON view, clipped for the model. */
export interface JsonViewLine {
  /** 1-based number of the line in the view. */
  readonly number: number;
  /** Source byte offset of the line's first token (a member's name, an element, a close). */
  readonly byteOffset: number;
  /** The line, clipped at maxLineChars code points. */
  readonly text: string;
  /** True when the line is longer than maxLineChars. */
  readonly clipped: boolean;
  /** For a clipped line, the source byte where the part not shown continues. */
  readonly continuesAt: number;
  /** Source bytes the line stands for: from its first token to the end of its last (or to continuesAt). */
  readonly coveredBytes: number;
}

/** JsonViewRendererOptions place a renderer at a checkpoint and say what to deliver. */
export interface JsonViewRendererOptions {
  readonly kind: JsonViewKind;
  /** Where the source stream handed to the renderer starts. */
  readonly checkpoint: JsonCheckpoint;
  /** 0-based view lines before this one are counted, never built. */
  readonly skipUntil: number;
  readonly maxLineChars: number;
  /** Receives each line from skipUntil on, in order; returns false to stop. */
  readonly onLine: (line: JsonViewLine) => boolean;
}

/** JsonViewRenderer turns source bytes from a checkpoint into view lines. */
export interface JsonViewRenderer {
  /** Feeds the next source chunk; returns false once onLine asked to stop. */
  push(chunk: Uint8Array): boolean;
  /** Ends the source, delivering the last line. */
  finish(): void;
}

const decoder = new TextDecoder("utf-8");

/** A line under construction, clipped as it grows. */
interface LineBuilder {
  /** True once the line is longer than maxChars: nothing more is kept. */
  readonly clipped: boolean;
  add(bytes: Uint8Array, sourceOffset: number): void;
  addText(ascii: string, sourceOffset: number): void;
  done(number: number, byteOffset: number, endOffset: number): JsonViewLine;
}

/** Encodes the ASCII punctuation and indentation the renderer adds. */
const asciiCache = new Map<string, Uint8Array>();
function ascii(text: string): Uint8Array {
  let bytes = asciiCache.get(text);
  if (bytes === undefined) {
    bytes = new TextEncoder().encode(text);
    if (asciiCache.size < 4096) asciiCache.set(text, bytes);
  }
  return bytes;
}

/**
 * createLineBuilder keeps at most maxChars code points of a line (never splitting one) and
 * remembers the source byte where the rest continues.
 */
function createLineBuilder(maxChars: number): LineBuilder {
  const parts: Uint8Array[] = [];
  let chars = 0;
  let clipped = false;
  let continuesAt = -1;
  const add = (bytes: Uint8Array, sourceOffset: number) => {
    if (bytes.length === 0 || clipped) return;
    if (chars === maxChars) {
      clipped = true;
      continuesAt = sourceOffset;
      return;
    }
    let k = 0;
    let taken = chars;
    for (; k < bytes.length; k++) {
      const b = bytes[k] as number;
      if ((b & 0xc0) !== 0x80) {
        if (taken === maxChars) break;
        taken++;
      }
    }
    chars = taken;
    if (k < bytes.length) {
      clipped = true;
      continuesAt = sourceOffset + k;
      parts.push(bytes.slice(0, k));
    } else {
      parts.push(bytes.slice());
    }
  };
  return {
    get clipped() {
      return clipped;
    },
    add,
    addText: (text, sourceOffset) => add(ascii(text), sourceOffset),
    done(number, byteOffset, endOffset) {
      const text = decoder.decode(Buffer.concat(parts));
      const end = clipped ? continuesAt : endOffset;
      return {
        number,
        byteOffset,
        text,
        clipped,
        continuesAt: clipped ? continuesAt : endOffset,
        coveredBytes: Math.max(0, end - byteOffset),
      };
    },
  };
}

/** A builder that keeps nothing, for lines counted but not shown. */
const nullBuilder: LineBuilder = {
  clipped: false,
  add() {},
  addText() {},
  done: (number, byteOffset) => ({
    number,
    byteOffset,
    text: "",
    clipped: false,
    continuesAt: byteOffset,
    coveredBytes: 0,
  }),
};

/**
 * createJsonViewRenderer renders the JSON view from a checkpoint: for a document, two-space
 * indentation, one member or element per line (`"name": value`), a comma after every member
 * or element but the last, `{}`/`[]` for an empty container and the closing bracket on a line
 * of its own otherwise, scalars exactly as written; for JSON Lines, each record compact on one
 * line (no whitespace between tokens, scalars as written).
 *
 * Guarantees: line numbers and offsets match the index the checkpoint came from; lines before
 * skipUntil cost only tokenizing; a line's memory is bounded by maxLineChars however long its
 * source is; stopping leaves the rest of the source unread. A JSON Lines record is delivered
 * as soon as it is clipped, so a consumer that stops there reads O(maxLineChars) of a record of
 * any size.
 */
export function createJsonViewRenderer(options: JsonViewRendererOptions): JsonViewRenderer {
  const { checkpoint, skipUntil, maxLineChars, onLine } = options;
  let line = checkpoint.line; // 0-based number of the next line to start
  let stopped = false;
  const events = options.kind === "document" ? documentEvents() : recordEvents();
  const tokenizer: JsonTokenizer = createJsonTokenizer(events.sink, {
    // Offload checked that the records are one per line; a value that spans lines in the
    // source (a node readCompactJson shows) is one compact line all the same.
    ...(options.kind === "lines" ? { sequence: true } : {}),
    resume: { offset: checkpoint.offset, stack: checkpoint.stack },
  });

  const newBuilder = () =>
    line >= skipUntil && !stopped ? createLineBuilder(maxLineChars) : nullBuilder;
  const deliver = (built: JsonViewLine) => {
    if (stopped) return;
    if (built.number - 1 >= skipUntil && !onLine(built)) stopped = true;
  };

  /** The pretty view of a document. */
  function documentEvents(): { sink: JsonEvents; flush: () => void } {
    let depth = checkpoint.stack.length;
    // The line waiting for the next event, which says whether a comma ends it.
    let pending: { builder: LineBuilder; number: number; start: number; end: number } | undefined;
    // The pending line ends with an open bracket whose container may turn out empty.
    let pendingIsOpen = false;
    let key: { raw: Uint8Array; offset: number } | undefined;
    let current: { builder: LineBuilder; number: number; start: number } | undefined;

    const flushPending = (comma: boolean) => {
      if (pending === undefined) return;
      if (comma) pending.builder.addText(",", pending.end);
      deliver(pending.builder.done(pending.number, pending.start, pending.end));
      pending = undefined;
      pendingIsOpen = false;
    };
    /** Starts a member or element line: indentation and the member's name. */
    const begin = (offset: number) => {
      flushPending(!pendingIsOpen);
      const builder = newBuilder();
      const start = key === undefined ? offset : key.offset;
      builder.addText("  ".repeat(depth), start);
      if (key !== undefined) {
        builder.add(key.raw, key.offset);
        builder.addText(": ", offset);
        key = undefined;
      }
      current = { builder, number: ++line, start };
      return current;
    };
    const open = (bracket: string) => (offset: number) => {
      const started = begin(offset);
      started.builder.addText(bracket, offset);
      pending = { ...started, end: offset + 1 };
      pendingIsOpen = true;
      current = undefined;
      depth++;
    };
    const close = (bracket: string) => (offset: number) => {
      depth--;
      if (pending !== undefined && pendingIsOpen) {
        // An empty container: its brackets share the line.
        pending.builder.addText(bracket, offset);
        pending.end = offset + 1;
        pendingIsOpen = false;
        return;
      }
      flushPending(false);
      const builder = newBuilder();
      builder.addText("  ".repeat(depth), offset);
      builder.addText(bracket, offset);
      pending = { builder, number: ++line, start: offset, end: offset + 1 };
    };
    const sink: JsonEvents = {
      openObject: open("{"),
      openArray: open("["),
      closeObject: close("}"),
      closeArray: close("]"),
      key(raw, offset) {
        flushPending(!pendingIsOpen);
        // The name is kept only until its value's line is built; a view past the call.
        key = { raw: raw.slice(), offset };
      },
      scalar(_kind, raw, offset, last) {
        const started = current ?? begin(offset);
        started.builder.add(raw, offset);
        if (last) {
          pending = { ...started, end: offset + raw.length };
          pendingIsOpen = false;
          current = undefined;
        } else {
          current = started;
        }
      },
    };
    return { sink, flush: () => flushPending(false) };
  }

  /** One compact line per record of JSON Lines. */
  function recordEvents(): { sink: JsonEvents; flush: () => void } {
    let depth = 0;
    let record:
      | { builder: LineBuilder; number: number; start: number; delivered: boolean }
      | undefined;
    // Whether the next token at each depth follows a sibling (and needs a comma).
    const follows: boolean[] = [false];
    let afterKey = false;
    let inString = false;

    const token = (offset: number) => {
      if (record === undefined) {
        record = { builder: newBuilder(), number: ++line, start: offset, delivered: false };
      } else if (!afterKey && follows[depth] === true) {
        record.builder.addText(",", offset);
      }
      afterKey = false;
      follows[depth] = true;
      return record;
    };
    /** Delivers a clipped record at once: the rest of it changes nothing shown. */
    const early = () => {
      if (record === undefined || record.delivered || !record.builder.clipped) return;
      record.delivered = true;
      deliver(record.builder.done(record.number, record.start, 0));
    };
    const end = (endOffset: number) => {
      if (depth !== 0 || record === undefined) return;
      if (!record.delivered) deliver(record.builder.done(record.number, record.start, endOffset));
      record = undefined;
      follows[0] = false;
    };
    const sink: JsonEvents = {
      openObject(offset) {
        token(offset).builder.addText("{", offset);
        follows[++depth] = false;
        early();
      },
      openArray(offset) {
        token(offset).builder.addText("[", offset);
        follows[++depth] = false;
        early();
      },
      closeObject(offset) {
        depth--;
        record?.builder.addText("}", offset);
        early();
        end(offset + 1);
      },
      closeArray(offset) {
        depth--;
        record?.builder.addText("]", offset);
        early();
        end(offset + 1);
      },
      key(raw, offset) {
        const r = token(offset);
        r.builder.add(raw, offset);
        r.builder.addText(":", offset + raw.length);
        afterKey = true;
        early();
      },
      scalar(_kind, raw, offset, last) {
        const r = inString && record !== undefined ? record : token(offset);
        r.builder.add(raw, offset);
        inString = !last;
        early();
        if (last) end(offset + raw.length);
      },
    };
    return { sink, flush: () => undefined };
  }

  return {
    push(chunk) {
      if (stopped) return false;
      tokenizer.write(chunk);
      return !stopped;
    },
    finish() {
      if (stopped) return;
      // Delivers a number that ends the source.
      tokenizer.end();
      events.flush();
    },
  };
}
