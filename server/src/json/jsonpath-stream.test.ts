import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createJsonTokenizer } from "./json-tokenizer.js";
import { createJsonValueBuilder, type JsonSpan } from "./json-value-builder.js";
import type { JsonValue } from "./jsonpath-ast.js";
import { evaluateJsonPath, normalizedPath, type PathStep } from "./jsonpath-eval.js";
import { parseJsonPath } from "./jsonpath-parse.js";
import { createJsonPathStream, type JsonPathStreamOptions } from "./jsonpath-stream.js";

interface CtsCase {
  readonly name: string;
  readonly selector: string;
  readonly document?: JsonValue;
  readonly invalid_selector?: boolean;
}
const cts = JSON.parse(
  readFileSync(new URL("../../../conformance/jsonpath-cts/cts.json", import.meta.url), "utf8"),
) as { tests: CtsCase[] };

const defaults: JsonPathStreamOptions = {
  skip: 0,
  limit: Number.MAX_SAFE_INTEGER,
  maxBufferBytes: 1 << 20,
  lines: false,
};

/** Streams `text` through the tokenizer in small chunks into a JSONPath stream. */
function stream(query: string, text: string, options: Partial<JsonPathStreamOptions> = {}) {
  const all = { ...defaults, ...options };
  const s = createJsonPathStream(parseJsonPath(query), all);
  const tokenizer = createJsonTokenizer(s.events, { lines: all.lines });
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += 7) tokenizer.write(bytes.subarray(at, at + 7));
  tokenizer.end();
  s.finish(bytes.length);
  return { s, bytes };
}

/** The span of the node at `path` in `text`. */
function spanOf(root: JsonSpan, path: readonly PathStep[]): JsonSpan {
  let at = root;
  for (const step of path) {
    const kids = at.kids;
    at = (Array.isArray(kids) ? kids[step as number] : kids?.[step as string]) as JsonSpan;
  }
  return at;
}

describe("createJsonPathStream", () => {
  it("selects the same nodes as the in-memory evaluator on every CTS case, once each, in document order", () => {
    let compared = 0;
    for (const test of cts.tests) {
      if (test.invalid_selector || test.document === undefined) continue;
      const text = JSON.stringify(test.document, null, 1);
      const builder = createJsonValueBuilder(1 << 20, () => "test");
      const tokenizer = createJsonTokenizer(builder);
      tokenizer.write(Buffer.from(text));
      tokenizer.end();
      const reference = evaluateJsonPath(parseJsonPath(test.selector), test.document);
      const expected = new Map<string, { offset: number; length: number }>();
      for (const node of reference) {
        const span = spanOf(builder.span, node.path);
        expected.set(normalizedPath(node.path), {
          offset: span.start,
          length: span.end - span.start,
        });
      }
      const ordered = [...expected]
        .sort((a, b) => a[1].offset - b[1].offset || b[1].length - a[1].length)
        .map(([path, at]) => ({ path, ...at }));
      const { s, bytes } = stream(test.selector, text);
      expect(s.nodes, `${test.name}: ${test.selector}`).toEqual(ordered);
      expect(s.total).toBe(ordered.length);
      for (const node of s.nodes) {
        const value = JSON.parse(bytes.subarray(node.offset, node.offset + node.length).toString());
        const want = reference.find((r) => normalizedPath(r.path) === node.path)?.value;
        expect(isDeepStrictEqual(value, want), `${test.name}: value at ${node.path}`).toBe(true);
      }
      compared++;
    }
    expect(compared).toBeGreaterThan(400);
  });

  it("keeps only the window of matches, counts all of them and is satisfied once they are complete", () => {
    const text = JSON.stringify({ items: Array.from({ length: 50 }, (_, i) => ({ id: i })) });
    const { s } = stream("$.items[*].id", text, { skip: 10, limit: 3 });
    expect(s.nodes.map((n) => n.path)).toEqual([
      "$['items'][10]['id']",
      "$['items'][11]['id']",
      "$['items'][12]['id']",
    ]);
    expect(s.total).toBe(50);
    expect(s.satisfied).toBe(true);
  });

  it("queries JSON Lines as an array of records", () => {
    const text = '{"a":1}\n{"a":2,"b":[true]}\n\n{"a":3}\n';
    const { s, bytes } = stream("$[?@.a >= 2]", text, { lines: true });
    expect(
      s.nodes.map((n) => [n.path, bytes.subarray(n.offset, n.offset + n.length).toString()]),
    ).toEqual([
      ["$[1]", '{"a":2,"b":[true]}'],
      ["$[2]", '{"a":3}'],
    ]);
    expect(stream("$[-1].a", text, { lines: true }).s.nodes.map((n) => n.path)).toEqual([
      "$[2]['a']",
    ]);
  });

  it("refuses with RESOURCE_EXHAUSTED a value it would have to hold past the bound", () => {
    const text = JSON.stringify({ big: Array.from({ length: 1000 }, (_, i) => i) });
    for (const query of ["$.big[-1]", "$[?@[0] == 0]", "$.big[?@ == $.big[0]]"]) {
      let error: unknown;
      try {
        stream(query, text, { maxBufferBytes: 1000 });
      } catch (err) {
        error = err;
      }
      expect(error, query).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.ResourceExhausted);
      expect((error as ConnectError).rawMessage).toContain("bound is 1000 bytes");
    }
    // Streaming selectors hold nothing: the same bound is no obstacle.
    expect(stream("$..big[3:5]", text, { maxBufferBytes: 10 }).s.total).toBe(2);
    expect(stream("$.big[?@ > 997]", text, { maxBufferBytes: 10 }).s.total).toBe(2);
  });
});
