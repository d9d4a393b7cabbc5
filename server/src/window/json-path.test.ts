import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ReadToolOutputRequestSchema,
  type ReadToolOutputResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { createWindowCaps } from "./caps.js";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

/** Collects the frames of a JSONPath window. */
async function frames(
  source: WindowSource,
  query: string,
  options: { maxMatches?: number; skip?: bigint } = {},
  caps = createWindowCaps({ maxLineChars: 40, maxWindowChars: 5000 }),
): Promise<ReadToolOutputResponse[]> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "r",
    handle: source.handle,
    window: { case: "jsonPath", value: { query, ...options } },
  });
  const out: ReadToolOutputResponse[] = [];
  for await (const frame of readWindow(source, request, caps)) out.push(frame);
  return out;
}

function trailer(all: ReadToolOutputResponse[]) {
  const last = all[all.length - 1]?.frame;
  if (last?.case !== "trailer") throw new Error("no trailer");
  return last.value;
}

function nodes(all: ReadToolOutputResponse[]) {
  return all.flatMap((f) =>
    f.frame.case === "content" && f.frame.value.body.case === "nodes"
      ? f.frame.value.body.value.nodes
      : [],
  );
}

async function refusal(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("not refused");
}

const doc = {
  items: [
    { id: 1, status: "ok", note: "short" },
    { id: 2, status: "failed", note: "x".repeat(100) },
    { id: 3, status: "failed", note: "y" },
  ],
};
const json = createBufferWindowSource(
  "res_json",
  "application/json",
  Buffer.from(JSON.stringify(doc, null, 2)),
  false,
);

describe("jsonPathWindow", () => {
  it("returns matched nodes in document order with paths, compact values, byte ranges and a total", async () => {
    const all = await frames(json, "$.items[?@.status == 'failed']");
    const got = nodes(all);
    expect(got.map((n) => [n.path, n.value, n.clipped])).toEqual([
      ["$['items'][1]", JSON.stringify(doc.items[1]).slice(0, 40), true],
      ["$['items'][2]", '{"id":3,"status":"failed","note":"y"}', false],
    ]);
    const bytes = Buffer.from(JSON.stringify(doc, null, 2));
    const second = got[1];
    expect(
      JSON.parse(
        bytes
          .subarray(
            Number(second?.byteOffset),
            Number(second?.byteOffset) + Number(second?.byteLength),
          )
          .toString(),
      ),
    ).toEqual(doc.items[2]);
    const t = trailer(all);
    expect(t.returnedMatches).toBe(2n);
    expect(t.totalMatches).toBe(2n);
    expect(t.nextOffset).toBeUndefined();
    expect(t.clipped).toBe(true);
    expect(t.eof).toBe(true);
    const from = Number(got[0]?.byteOffset);
    const to = from + Number(got[0]?.byteLength);
    expect(t.rendered).toBe(
      `[res_json] nodes 1-2 for JSONPath "$.items[?@.status == 'failed']" of 2\n` +
        `$['items'][1]\t${JSON.stringify(doc.items[1]).slice(0, 40)} [… value clipped at 40 chars; it spans bytes ${from}-${to}: read bytes offset=${from}]\n` +
        `$['items'][2]\t{"id":3,"status":"failed","note":"y"}\n` +
        "[no more matches]\n",
    );
  });

  it("pages with skip and max_matches, stopping the scan once the window is complete", async () => {
    const first = await frames(json, "$..id", { maxMatches: 1 });
    expect(nodes(first).map((n) => n.value)).toEqual(["1"]);
    expect(trailer(first).nextOffset).toBe(1n);
    expect(trailer(first).totalMatches).toBeUndefined();
    expect(trailer(first).eof).toBe(false);
    expect(trailer(first).rendered).toBe(
      `[res_json] nodes 1-1 for JSONPath "$..id"\n$['items'][0]['id']\t1\n[more matches: skip=1]\n`,
    );
    const rest = await frames(json, "$..id", { skip: 1n });
    expect(nodes(rest).map((n) => n.path)).toEqual(["$['items'][1]['id']", "$['items'][2]['id']"]);
    expect(trailer(rest).totalMatches).toBe(3n);
    const none = await frames(json, "$..id", { skip: 5n });
    expect(trailer(none).rendered).toBe(
      `[res_json] no nodes after skip=5 for JSONPath "$..id" (3 in all)\n[no more matches]\n`,
    );
  });

  it("queries JSON Lines as an array of records", async () => {
    const jsonl = createBufferWindowSource(
      "res_jsonl",
      "application/x-ndjson",
      Buffer.from('{"a":1}\n{"a":2}\n'),
      false,
    );
    expect(nodes(await frames(jsonl, "$[*].a")).map((n) => [n.path, n.value])).toEqual([
      ["$[0]['a']", "1"],
      ["$[1]['a']", "2"],
    ]);
    expect(nodes(await frames(jsonl, "$")).map((n) => n.value)).toEqual(['[{"a":1},{"a":2}]']);
    // Records one per line are JSON Lines whatever the declared type, as offload classifies them.
    const undeclared = createBufferWindowSource(
      "res_log",
      "text/plain",
      Buffer.from('{"level":"info"}\n{"level":"error","at":7}\n'),
      false,
    );
    expect(nodes(await frames(undeclared, "$[?@.level == 'error'].at")).map((n) => n.path)).toEqual(
      ["$[1]['at']"],
    );
  });

  it("refuses with RESOURCE_EXHAUSTED a query that would hold more than the bound", async () => {
    const big = createBufferWindowSource(
      "res_big",
      "application/json",
      Buffer.from(JSON.stringify({ items: Array.from({ length: 2_000_000 }, (_, i) => i) })),
      false,
    );
    const last = await refusal(frames(big, "$.items[-1]"));
    expect(last.code).toBe(Code.ResourceExhausted);
    expect(last.rawMessage).toContain("a negative index or slice needs the length of $['items']");
    // The same array streams for a forward index.
    expect(nodes(await frames(big, "$.items[1999999]")).map((n) => n.value)).toEqual(["1999999"]);
  });

  it("refuses an invalid query with INVALID_ARGUMENT and a payload that is not JSON with FAILED_PRECONDITION", async () => {
    const bad = await refusal(frames(json, "$.items[?"));
    expect(bad.code).toBe(Code.InvalidArgument);
    expect(bad.rawMessage).toContain("at position 9");
    const text = createBufferWindowSource("res_txt", "text/plain", Buffer.from("hello\n"), false);
    const notJson = await refusal(frames(text, "$"));
    expect(notJson.code).toBe(Code.FailedPrecondition);
    expect(notJson.rawMessage).toMatch(/^not JSON/);
    const binary = createBufferWindowSource("res_bin", "", Buffer.from([0, 1]), true);
    expect((await refusal(frames(binary, "$"))).code).toBe(Code.FailedPrecondition);
  });
});

/** A JSON output whose bytes are `text`. */
const jsonOf = (handle: string, text: string) =>
  createBufferWindowSource(handle, "application/json", Buffer.from(text), false);

describe("jsonPathWindow's bound on in-memory work", () => {
  it("refuses a descendant filter over deeply nested arrays instead of running out of memory", async () => {
    // Each of the 1,000 nested arrays is under the 8 MiB a held value may span, so they pass
    // that bound; evaluating the rest of the query on them built a path of a thousand steps
    // for each of 20,000 records, and a larger document ran the process out of memory.
    const records = Array.from({ length: 20_000 }, (_, i) => `{"a":${i}}`).join(",");
    const deep = jsonOf("res_deep", `${"[".repeat(1000)}${records}${"]".repeat(1000)}`);
    const refused = await refusal(frames(deep, "$..[?@.a==1]"));
    expect(refused.code).toBe(Code.ResourceExhausted);
    expect(refused.rawMessage).toMatch(
      /^the query does more work on the values it holds than a window may/,
    );
  });

  it("refuses nested descendant filters over a few hundred bytes, whose work grows with depth^5", async () => {
    const nest = jsonOf("res_nest", `${"[".repeat(150)}1${"]".repeat(150)}`);
    const refused = await refusal(frames(nest, "$..[?@..[?@..[?@..*]]]"));
    expect(refused.code).toBe(Code.ResourceExhausted);
  });

  it("charges a heavy pattern by its weight: compiling each a document supplies, and matching", async () => {
    // Every element brings its own pattern: RE2 compiles each (tens of milliseconds apiece).
    const patterns = jsonOf(
      "res_patterns",
      JSON.stringify(Array.from({ length: 300 }, (_, i) => ({ s: "a", r: `\\p{L}{1000}x${i}` }))),
    );
    expect((await refusal(frames(patterns, "$[?match(@.s, @.r)]"))).code).toBe(
      Code.ResourceExhausted,
    );
    const long = jsonOf("res_long", JSON.stringify(["é".repeat(150_000)]));
    expect((await refusal(frames(long, "$[?search(@, '(.{100}){10}[0-9]')]"))).code).toBe(
      Code.ResourceExhausted,
    );
  });

  it("still runs a filter with a descendant query over every record of a large document", async () => {
    // 20,000 records, each tested by count(@..*): the budget grows with the bytes read.
    const many = JSON.stringify({
      items: Array.from({ length: 20_000 }, (_, i) => ({ id: i, tags: { a: [1, 2, i % 7] } })),
    });
    const all = await frames(
      jsonOf("res_many", many),
      "$.items[?count(@..*) == 6 && @.id > 19990].id",
    );
    expect(nodes(all).map((n) => n.value)).toEqual([
      "19991",
      "19992",
      "19993",
      "19994",
      "19995",
      "19996",
      "19997",
      "19998",
      "19999",
    ]);
  });
});
