import { describe, expect, it } from "vitest";
import type { JsonEvents, JsonScalarKind } from "./json-events.js";
import {
  createJsonTokenizer,
  isJsonSyntaxError,
  type JsonTokenizerOptions,
} from "./json-tokenizer.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A recorded event; string pieces are merged so chunkings compare equal. */
type Recorded = [string, number, string?];

/** record runs the tokenizer over `chunks` and returns its events, or the error's offset and reason. */
function record(
  chunks: Uint8Array[],
  options: JsonTokenizerOptions = {},
): { events: Recorded[]; error?: [number, string] } {
  const events: Recorded[] = [];
  let piece: { offset: number; bytes: number[]; next: number } | undefined;
  const sink: JsonEvents = {
    openObject: (o) => events.push(["{", o]),
    closeObject: (o) => events.push(["}", o]),
    openArray: (o) => events.push(["[", o]),
    closeArray: (o) => events.push(["]", o]),
    key: (raw, o) => events.push(["key", o, Buffer.from(raw).toString("latin1")]),
    scalar(kind: JsonScalarKind, raw, o, last) {
      if (kind !== "string") {
        expect(last).toBe(true);
        events.push([kind, o, Buffer.from(raw).toString("latin1")]);
        return;
      }
      if (piece === undefined) piece = { offset: o, bytes: [], next: o };
      // Pieces are consecutive: each starts where the previous ended.
      expect(o).toBe(piece.next);
      piece.bytes.push(...raw);
      piece.next = o + raw.length;
      if (last) {
        events.push(["string", piece.offset, Buffer.from(piece.bytes).toString("latin1")]);
        piece = undefined;
      }
    },
  };
  const tokenizer = createJsonTokenizer(sink, options);
  try {
    for (const chunk of chunks) tokenizer.write(chunk);
    tokenizer.end();
    return { events };
  } catch (error) {
    if (!isJsonSyntaxError(error)) throw error;
    return { events, error: [error.jsonOffset, error.jsonReason] };
  }
}

/** rebuild turns recorded events back into the value they describe. */
function rebuild(events: Recorded[]): unknown[] {
  const values: unknown[] = [];
  const stack: { container: Record<string, unknown> | unknown[]; key?: string }[] = [];
  const put = (value: unknown) => {
    const top = stack[stack.length - 1];
    if (top === undefined) values.push(value);
    else if (Array.isArray(top.container)) top.container.push(value);
    else
      Object.defineProperty(top.container, top.key as string, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  };
  for (const [kind, , raw] of events) {
    if (kind === "{" || kind === "[") {
      const container = kind === "{" ? {} : [];
      put(container);
      stack.push({ container });
    } else if (kind === "}" || kind === "]") {
      stack.pop();
    } else if (kind === "key") {
      (stack[stack.length - 1] as { key?: string }).key = JSON.parse(utf8(raw as string));
    } else {
      put(JSON.parse(utf8(raw as string)));
    }
  }
  return values;
}

const utf8 = (latin1: string) => decoder.decode(Buffer.from(latin1, "latin1"));

/** whatJsonParseSays is the oracle: the parsed value, or undefined when the bytes are not JSON. */
function whatJsonParseSays(bytes: Uint8Array): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(decoder.decode(bytes)) };
  } catch {
    return undefined;
  }
}

function splits(bytes: Uint8Array): Uint8Array[][] {
  const out: Uint8Array[][] = [[bytes]];
  for (let at = 0; at <= bytes.length; at++) out.push([bytes.subarray(0, at), bytes.subarray(at)]);
  out.push(Array.from(bytes, (_, k) => bytes.subarray(k, k + 1)));
  return out;
}

/** Checks that every chunking gives the same events and the same verdict as the whole text. */
function expectChunkingInvariant(bytes: Uint8Array, options: JsonTokenizerOptions = {}) {
  const whole = record([bytes], options);
  for (const chunks of splits(bytes)) {
    const got = record(chunks, options);
    expect(got.error).toEqual(whole.error);
    expect(got.events).toEqual(whole.events);
  }
  return whole;
}

const valid = [
  "0",
  "-0",
  "-0.0e+0",
  "12.5E-3",
  "1e5",
  '""',
  '"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00"',
  '"\\ud800"',
  '"héllo wörld ☃ 😀"',
  "true",
  "false",
  "null",
  "[]",
  "{}",
  " \t\r\n[ 1 , 2 ,\n 3 ] \n",
  '{"a":{"b":[1,{"c":null}],"d":"x"},"e":[],"f":{}}',
  "[[[[[]]]]]",
  '{"a":1,"a":2}',
  `"${"long ".repeat(500)}"`,
  `{"${"k".repeat(300)}": -123456789012345678901234567890.5e-10}`,
];

const invalid: [string, number, string][] = [
  ["", 0, "no value"],
  ["   ", 3, "no value"],
  ["[1,]", 3, "trailing comma"],
  ['{"a":1,}', 7, "trailing comma"],
  ["[1 2]", 3, "expected ',' or ']'"],
  ['{"a" 1}', 5, "expected ':'"],
  ["{1:2}", 1, "expected a member name"],
  ["01", 1, "leading zero in number"],
  ["-01", 2, "leading zero in number"],
  ["1.", 2, "incomplete number"],
  ["1.e5", 2, "invalid number"],
  ["-", 1, "incomplete number"],
  ["1e", 2, "incomplete number"],
  ["+1", 0, "unexpected byte"],
  [".5", 0, "unexpected byte"],
  ["1 2", 2, "more than one top-level value"],
  ['"\\x"', 2, "invalid escape"],
  ['"\\u12G4"', 5, "invalid \\u escape"],
  ['"a\nb"', 2, "control character in string"],
  ['"abc', 4, "unterminated string"],
  ["[1", 2, "unclosed container"],
  ["[1}", 2, "mismatched close"],
  ['{"a":1]', 6, "mismatched close"],
  ["tru", 3, "incomplete literal"],
  ["trUe", 2, "invalid literal"],
  ["nul1", 3, "invalid literal"],
  ["[,1]", 1, "unexpected ','"],
  ["]", 0, "unexpected ']'"],
  ["NaN", 0, "unexpected byte"],
  ['{"a":}', 5, "unexpected '}'"],
];

describe("createJsonTokenizer", () => {
  it("accepts RFC 8259 texts, with the same events at every split point and in 1-byte chunks", () => {
    for (const text of valid) {
      const bytes = encoder.encode(text);
      const whole = expectChunkingInvariant(bytes);
      expect(whole.error, text).toBeUndefined();
      expect(rebuild(whole.events), text).toEqual([JSON.parse(text)]);
    }
  });

  it("reports offsets of tokens as byte offsets", () => {
    const { events } = record([encoder.encode(' {"é": [ "ü", 10 ]}')]);
    expect(events).toEqual([
      ["{", 1],
      ["key", 2, '"\xc3\xa9"'],
      ["[", 8],
      ["string", 10, '"\xc3\xbc"'],
      ["number", 16, "10"],
      ["]", 19],
      ["}", 20],
    ]);
  });

  it("rejects what JSON.parse rejects, naming the byte and the reason, at every split point", () => {
    for (const [text, offset, reason] of invalid) {
      const bytes = encoder.encode(text);
      expect(whatJsonParseSays(bytes), text).toBeUndefined();
      const whole = expectChunkingInvariant(bytes);
      expect(whole.error, text).toEqual([offset, reason]);
    }
  });

  it("rejects invalid UTF-8 inside strings and any raw non-ASCII outside them", () => {
    const cases: [number[], number][] = [
      [[0x22, 0xff, 0x22], 1],
      [[0x22, 0xc0, 0x80, 0x22], 1], // overlong NUL
      [[0x22, 0xe0, 0x80, 0x80, 0x22], 2], // overlong 3-byte
      [[0x22, 0xed, 0xa0, 0x80, 0x22], 2], // encoded surrogate
      [[0x22, 0xf4, 0x90, 0x80, 0x80, 0x22], 2], // above U+10FFFF
      [[0x22, 0xe2, 0x98, 0x22], 3], // truncated sequence
      [[0x22, 0x80, 0x22], 1], // lone continuation
      [[0xef, 0xbb, 0xbf, 0x31], 0], // byte order mark
      [[0x5b, 0xc3, 0xa9, 0x5d], 1],
    ];
    for (const [list, offset] of cases) {
      const bytes = Uint8Array.from(list);
      const whole = expectChunkingInvariant(bytes);
      expect(whole.error?.[0], String(list)).toBe(offset);
      expect(whatJsonParseSays(bytes)).toBeUndefined();
    }
  });

  it("bounds nesting depth, member names and numbers", () => {
    const deep = (n: number) => encoder.encode("[".repeat(n) + "]".repeat(n));
    expect(record([deep(1024)]).error).toBeUndefined();
    expect(record([deep(1025)]).error).toEqual([1024, "nesting deeper than 1024"]);
    // A name of 65535 bytes between its quotes is 65537 with them, one past the bound.
    expect(record([encoder.encode(`{"${"k".repeat(65534)}":1}`)]).error).toBeUndefined();
    const longKey = encoder.encode(`{"${"k".repeat(65535)}":1}`);
    expect(record([longKey]).error).toEqual([1, "member name longer than 65536 bytes"]);
    // Carried across chunks, the name is bounded the same.
    expect(record([longKey.subarray(0, 40), longKey.subarray(40)]).error).toEqual([
      1,
      "member name longer than 65536 bytes",
    ]);
    expect(record([encoder.encode(`[${"9".repeat(4096)}]`)]).error).toBeUndefined();
    expect(record([encoder.encode(`[${"9".repeat(4097)}]`)]).error).toEqual([
      1,
      "number longer than 4096 bytes",
    ]);
  });

  it("delivers a long string as consecutive pieces of the chunks, the last flagged", () => {
    const pieces: [number, number, boolean][] = [];
    const tokenizer = createJsonTokenizer({
      openObject() {},
      closeObject() {},
      openArray() {},
      closeArray() {},
      key() {},
      scalar: (_kind, raw, offset, last) => pieces.push([offset, raw.length, last]),
    });
    tokenizer.write(encoder.encode('["abc'));
    tokenizer.write(encoder.encode("defg"));
    tokenizer.write(encoder.encode('h",1]'));
    tokenizer.end();
    expect(pieces).toEqual([
      [1, 4, false],
      [5, 4, false],
      [9, 2, true],
      [12, 1, true],
    ]);
  });

  it("reads JSON Lines: one value per line, blank lines allowed, none spanning lines", () => {
    const ok = encoder.encode('{"a":1}\n\n[2, 3]\r\n"x"\n4\ntrue');
    const whole = expectChunkingInvariant(ok, { lines: true });
    expect(whole.error).toBeUndefined();
    expect(rebuild(whole.events)).toEqual([{ a: 1 }, [2, 3], "x", 4, true]);
    expect(record([encoder.encode('{"a":\n1}')], { lines: true }).error).toEqual([
      5,
      "a JSON Lines record spans lines",
    ]);
    expect(record([encoder.encode("1 2\n")], { lines: true }).error).toEqual([
      2,
      "more than one value on a line",
    ]);
    expect(record([encoder.encode("\n\n")], { lines: true }).error).toEqual([2, "no value"]);
  });

  it("reports in sequence mode whether values span lines or share one, without failing", () => {
    const flags = (text: string) => {
      const tokenizer = createJsonTokenizer(
        {
          openObject() {},
          closeObject() {},
          openArray() {},
          closeArray() {},
          key() {},
          scalar() {},
        },
        { sequence: true },
      );
      tokenizer.write(encoder.encode(text));
      tokenizer.end();
      return [tokenizer.values, tokenizer.spansLines, tokenizer.sharesLine];
    };
    expect(flags('{"a":1}\n[2]\n3')).toEqual([3, false, false]);
    expect(flags('{\n"a":1}')).toEqual([1, true, false]);
    expect(flags("1 2\n")).toEqual([2, false, true]);
    expect(flags("{}{}")).toEqual([2, false, true]);
    expect(record([encoder.encode("[1,]")], { sequence: true }).error).toEqual([
      3,
      "trailing comma",
    ]);
  });

  it("with bytes off delivers the same events and offsets with empty raws", () => {
    const text = encoder.encode('{"a": [1, "long string", true, {"b": -2.5e3}], "c": null}');
    const structure = (events: Recorded[]) => events.map(([kind, offset]) => [kind, offset]);
    for (const chunks of splits(text)) {
      const plain: [string, number, number][] = [];
      const tokenizer = createJsonTokenizer(
        {
          openObject: (o) => plain.push(["{", o, 0]),
          closeObject: (o) => plain.push(["}", o, 0]),
          openArray: (o) => plain.push(["[", o, 0]),
          closeArray: (o) => plain.push(["]", o, 0]),
          key: (raw, o) => plain.push(["key", o, raw.length]),
          scalar: (kind, raw, o, last) => {
            if (last)
              plain.push([kind, o, kind === "string" || kind === "number" ? raw.length : 0]);
          },
        },
        { bytes: false },
      );
      for (const chunk of chunks) tokenizer.write(chunk);
      tokenizer.end();
      const withBytes = structure(record([text]).events);
      // A string's last piece starts where it does; compare the starts of whole tokens only.
      expect(plain.filter(([k]) => k !== "string").map(([k, o]) => [k, o])).toEqual(
        withBytes.filter(([k]) => k !== "string"),
      );
      expect(plain.every(([, , length]) => length === 0)).toBe(true);
    }
  });

  it("resumes inside a container at a member or element start", () => {
    const text = '{"a":[1,{"b":2},3],"c":4}';
    const at = text.indexOf("{", 1) + 0; // the element {"b":2} inside the array inside the object
    const tail = encoder.encode(text.slice(at));
    const { events } = record([tail], { resume: { offset: at, stack: [1, 2] } });
    expect(events.slice(0, 4)).toEqual([
      ["{", at],
      ["key", at + 1, '"b"'],
      ["number", at + 5, "2"],
      ["}", at + 6],
    ]);
    expect(events.at(-1)).toEqual(["}", text.length - 1]);
  });

  it("agrees with JSON.parse on random documents and on random corruptions of them", () => {
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x80000000;
    };
    const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)] as T;
    const ws = () => (random() < 0.7 ? "" : pick([" ", "\n", "\t", "\r\n", "  "]));
    const str = () => {
      let s = "";
      const n = Math.floor(random() * 12);
      for (let k = 0; k < n; k++)
        s += pick(["a", "Z", " ", "é", "😀", "\\n", "\\u0041", '\\"', "\\\\", "☃", "\\/", "x"]);
      return `"${s}"`;
    };
    const num = () =>
      pick(["0", "-0", "1", "-17", "3.25", "1e10", "-2.5E-3", "123456789", "0.000001"]);
    const gen = (depth: number): string => {
      const r = random();
      if (depth > 5 || r < 0.4) return pick([str, num, () => pick(["true", "false", "null"])])();
      if (r < 0.7) {
        const n = Math.floor(random() * 5);
        return `[${ws()}${Array.from({ length: n }, () => ws() + gen(depth + 1) + ws()).join(",")}]`;
      }
      const n = Math.floor(random() * 5);
      return `{${ws()}${Array.from({ length: n }, () => `${ws()}${str()}${ws()}:${ws()}${gen(depth + 1)}${ws()}`).join(",")}}`;
    };
    for (let doc = 0; doc < 300; doc++) {
      const text = ws() + gen(0) + ws();
      const bytes = encoder.encode(text);
      const whole = record([bytes]);
      expect(whole.error, text).toBeUndefined();
      expect(rebuild(whole.events), text).toEqual([JSON.parse(text)]);
      if (doc % 10 === 0) expectChunkingInvariant(bytes);
      // Corrupt one byte: delete it, duplicate it or replace it.
      for (let k = 0; k < 5; k++) {
        const at = Math.floor(random() * bytes.length);
        const list = Array.from(bytes);
        const how = random();
        if (how < 0.33) list.splice(at, 1);
        else if (how < 0.66) list.splice(at, 0, list[at] as number);
        else
          list[at] = pick([0x2c, 0x22, 0x5c, 0x30, 0x7d, 0x5d, 0x3a, 0x20, 0x80, 0x0a, 0x2e, 0x65]);
        const corrupt = Uint8Array.from(list);
        const oracle = whatJsonParseSays(corrupt);
        const got = record([corrupt]);
        const label = Buffer.from(corrupt).toString("latin1");
        if (oracle === undefined) {
          expect(got.error, label).toBeDefined();
        } else {
          expect(got.error, label).toBeUndefined();
          expect(rebuild(got.events), label).toEqual([oracle.value]);
        }
        expect(record(splits(corrupt).at(-1) as Uint8Array[]).error).toEqual(got.error);
      }
    }
  });
});
