import { describe, expect, it } from "vitest";
import { nearestCheckpoint } from "../window/source.js";
import {
  createJsonViewIndexer,
  decodeJsonViewIndex,
  encodeJsonViewIndex,
  type JsonViewIndex,
  jsonViewMaxCheckpoints,
} from "./json-view-index.js";
import { createJsonViewRenderer, type JsonViewLine } from "./json-view-renderer.js";

const encoder = new TextEncoder();

function indexOf(text: string, stride: number, contentType = "application/json", chunk = 7) {
  const bytes = encoder.encode(text);
  const indexer = createJsonViewIndexer({ stride, contentType });
  for (let at = 0; at < bytes.length; at += chunk) indexer.push(bytes.subarray(at, at + chunk));
  return { bytes, index: indexer.finish() };
}

/** Renders view lines [first, first + count) from the nearest checkpoint, in chunks. */
function render(
  bytes: Uint8Array,
  index: JsonViewIndex,
  first: number,
  count: number,
  maxLineChars = 1000,
  chunk = 5,
): JsonViewLine[] {
  const checkpoint = nearestCheckpoint(index, first);
  const lines: JsonViewLine[] = [];
  const renderer = createJsonViewRenderer({
    kind: index.kind,
    checkpoint,
    skipUntil: first,
    maxLineChars,
    onLine: (line) => {
      lines.push(line);
      return lines.length < count;
    },
  });
  for (let at = checkpoint.offset; at < bytes.length; at += chunk) {
    if (!renderer.push(bytes.subarray(at, at + chunk))) return lines;
  }
  renderer.finish();
  return lines;
}

let seed = 7;
const random = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x80000000;
};
const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)] as T;
function value(depth: number): unknown {
  const r = random();
  if (depth > 4 || r < 0.35) {
    return pick<() => unknown>([
      () => pick(["", "a", "héllo ☃", 'quote"and\\back', "😀 emoji", "tab\there"]),
      () => pick([0, 1, -17, 3.25, 1e21, 123456789]),
      () => pick([true, false, null]),
    ])();
  }
  const n = Math.floor(random() * 4);
  if (r < 0.65) return Array.from({ length: n }, () => value(depth + 1));
  return Object.fromEntries(
    Array.from({ length: n }, (_, k) => [`k${k}${pick(["", "é", " x"])}`, value(depth + 1)]),
  );
}

describe("JSON view", () => {
  it("renders a document exactly as JSON.stringify(value, null, 2) for canonical scalars, from every line", () => {
    for (let doc = 0; doc < 60; doc++) {
      const v = value(0);
      // The same document minified and pretty: the view depends on neither.
      for (const text of [
        JSON.stringify(v),
        JSON.stringify(v, null, 4),
        ` ${JSON.stringify(v, null, "\t")}\n`,
      ]) {
        const expected = JSON.stringify(v, null, 2).split("\n");
        const stride = 1 + Math.floor(random() * 5);
        const { bytes, index } = indexOf(text, stride);
        expect(index?.kind).toBe("document");
        if (index === undefined) return;
        expect(index.viewLines).toBe(expected.length);
        for (let first = 0; first < expected.length; first++) {
          const lines = render(bytes, index, first, 3);
          expect(lines.map((l) => l.text)).toEqual(expected.slice(first, first + 3));
          expect(lines.map((l) => l.number)).toEqual(
            expected.slice(first, first + 3).map((_, k) => first + k + 1),
          );
        }
      }
    }
  });

  it("keeps scalars as written and gives each line the byte offset of its first token", () => {
    const text = '{"a": 1.50, "b" : [ "\\u0041", 1E3 ],\n "c": {}, "d": [[]] }';
    const { bytes, index } = indexOf(text, 2);
    if (index === undefined) throw new Error("not JSON");
    const lines = render(bytes, index, 0, 100);
    expect(lines.map((l) => l.text)).toEqual([
      "{",
      '  "a": 1.50,',
      '  "b": [',
      '    "\\u0041",',
      "    1E3",
      "  ],",
      '  "c": {},',
      '  "d": [',
      "    []",
      "  ]",
      "}",
    ]);
    expect(lines.map((l) => l.byteOffset)).toEqual([0, 1, 12, 20, 30, 34, 38, 47, 53, 55, 57]);
  });

  it("clips a long line at maxLineChars and says where it continues in the source", () => {
    const long = "x".repeat(50);
    const text = `{"key":"${long}","é":"ééééé"}`;
    const { bytes, index } = indexOf(text, 1024);
    if (index === undefined) throw new Error("not JSON");
    const [, first, second] = render(bytes, index, 0, 3, 12, 3);
    expect(first).toMatchObject({ text: '  "key": "xx', clipped: true, continuesAt: 10 });
    expect(second).toMatchObject({ text: '  "é": "éééé', clipped: true });
    expect(Buffer.from(bytes.subarray(second?.continuesAt)).toString()).toMatch(/^é"}/);
  });

  it("pages JSON Lines one compact record per line", () => {
    const text = '{"a": 1, "b": [1, 2, {"c": null}]}\n\n  "x"  \r\n[]\n{}\n-0.5e3\n';
    const { bytes, index } = indexOf(text, 2, "text/plain", 3);
    expect(index?.kind).toBe("lines");
    if (index === undefined) return;
    expect(index.viewLines).toBe(5);
    const expected = ['{"a":1,"b":[1,2,{"c":null}]}', '"x"', "[]", "{}", "-0.5e3"];
    for (let first = 0; first < 5; first++) {
      expect(render(bytes, index, first, 2).map((l) => l.text)).toEqual(
        expected.slice(first, first + 2),
      );
    }
    expect(render(bytes, index, 0, 5).map((l) => l.byteOffset)).toEqual([0, 38, 45, 48, 51]);
  });

  it("delivers a clipped record as soon as it clips, so stopping there reads no more of it", () => {
    const text = `{"a":"${"x".repeat(100_000)}"}\n{"b":1}\n`;
    const { bytes, index } = indexOf(text, 2, "application/x-ndjson", 1 << 16);
    if (index === undefined) throw new Error("not JSON");
    const lines: JsonViewLine[] = [];
    const renderer = createJsonViewRenderer({
      kind: "lines",
      checkpoint: index.checkpoint(0),
      skipUntil: 0,
      maxLineChars: 10,
      onLine: (line) => lines.push(line) < 1,
    });
    let pushed = 0;
    for (let at = 0; at < bytes.length; at += 100) {
      pushed++;
      if (!renderer.push(bytes.subarray(at, at + 100))) break;
    }
    expect(pushed).toBe(1);
    expect(lines).toEqual([
      {
        number: 1,
        byteOffset: 0,
        text: '{"a":"xxxx',
        clipped: true,
        continuesAt: 10,
        coveredBytes: 10,
      },
    ]);
    // Read on, the record is still one line, and the next record the next one.
    expect(render(bytes, index, 0, 2, 10).map((l) => [l.number, l.text, l.continuesAt])).toEqual([
      [1, '{"a":"xxxx', 10],
      [2, '{"b":1}', text.length - 1],
    ]);
  });

  it("tells a document from JSON Lines and from neither", () => {
    const kind = (text: string, contentType = "application/json") =>
      indexOf(text, 4, contentType)?.index?.kind;
    expect(kind('{"a":1}')).toBe("document");
    expect(kind('{"a":1}', "application/x-ndjson; charset=utf-8")).toBe("lines");
    expect(kind('{\n"a":1}', "application/jsonl")).toBe("document");
    expect(kind('{"a":1}\n{"a":2}\n')).toBe("lines");
    expect(kind("1\n2")).toBe("lines");
    expect(kind('{"a":1} {"a":2}\n')).toBeUndefined();
    expect(kind('{"a":\n1}\n{"a":2}')).toBeUndefined();
    expect(kind("")).toBeUndefined();
    expect(kind("hello world")).toBeUndefined();
    expect(kind('{"a":1,}')).toBeUndefined();
    expect(kind(`${"[".repeat(1025)}${"]".repeat(1025)}`)).toBeUndefined();
  });

  it("says why a payload has no JSON view", () => {
    const why = (text: string) => {
      const indexer = createJsonViewIndexer({});
      indexer.push(encoder.encode(text));
      expect(indexer.finish()).toBeUndefined();
      return indexer.notJsonReason();
    };
    expect(why('{"a": [1, 2,]}')).toBe("trailing comma at byte 12");
    expect(why("hello")).toBe("unexpected byte at byte 0");
    expect(why('{"a":1} {"b":2}')).toBe("2 top-level values, some sharing a line");
    expect(why('{"a":\n1}\n{"b":2}')).toBe("2 top-level values, some spanning lines");
    expect(why("")).toBe("no value at byte 0");
  });

  it("resumes below the checkpoint depth bound from the nearest shallower line", () => {
    const deep = `${"[".repeat(70)}1,2,3${"]".repeat(70)}`;
    const v = JSON.parse(deep);
    const expected = JSON.stringify(v, null, 2).split("\n");
    const { bytes, index } = indexOf(deep, 4);
    if (index === undefined) throw new Error("not JSON");
    const all = Array.from({ length: index.count }, (_, k) => index.checkpoint(k));
    expect(all.every((c) => c.stack.length <= 64)).toBe(true);
    for (let first = 0; first < expected.length; first += 3) {
      expect(render(bytes, index, first, 3).map((l) => l.text)).toEqual(
        expected.slice(first, first + 3),
      );
    }
  });

  it("serializes checkpoints so one entry decodes alone", () => {
    const v = { a: [[{ b: [1, 2, 3, [4, 5]] }]], c: Array.from({ length: 40 }, (_, k) => ({ k })) };
    const { index } = indexOf(JSON.stringify(v), 3);
    if (index === undefined) throw new Error("not JSON");
    const decoded = decodeJsonViewIndex(encodeJsonViewIndex(index), index.viewLines);
    const all = (ix: JsonViewIndex) => Array.from({ length: ix.count }, (_, k) => ix.checkpoint(k));
    expect(decoded.count).toBeGreaterThan(10);
    expect(all(decoded)).toEqual(all(index));
    expect([decoded.kind, decoded.stride, decoded.viewLines]).toEqual([
      index.kind,
      index.stride,
      index.viewLines,
    ]);
  });

  it("bounds the index: past jsonViewMaxCheckpoints the stride doubles", () => {
    const n = 600_000;
    const text = `[${Array.from({ length: n }, (_, k) => k % 10).join(",")}]`;
    const { bytes, index } = indexOf(text, 1, "application/json", 1 << 16);
    if (index === undefined) throw new Error("not JSON");
    expect(index.viewLines).toBe(n + 2);
    expect(index.count).toBeLessThanOrEqual(jsonViewMaxCheckpoints);
    expect(index.stride).toBe(4);
    for (let k = 0; k < index.count; k += 9973) {
      expect(index.checkpoint(k).line).toBeGreaterThanOrEqual(k * index.stride);
    }
    for (const first of [0, 1, 262_143, 262_144, 524_289, n - 1]) {
      expect(render(bytes, index, first, 3, 100, 1 << 16).map((l) => l.text)).toEqual(
        [first, first + 1, first + 2]
          .map((line) =>
            line === 0
              ? "["
              : line === n + 1
                ? "]"
                : `  ${(line - 1) % 10}${line === n ? "" : ","}`,
          )
          .filter((_, j) => first + j < n + 2),
      );
    }
  });
});
