import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ReadToolOutputRequestSchema,
  type ReadToolOutputResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { countingSlice } from "../../../test/support/counting-slice.js";
import { bytesBody } from "../backends/body.js";
import { createMemoryBackend } from "../backends/memory.js";
import type { StoredRecord } from "../record.js";
import { windowSourceFor } from "../resolve.js";
import { defaultWindowCaps, type WindowCaps } from "./caps.js";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

/** A record that stands: no store object of it has gone missing on purpose here. */
const standing = async () => undefined;

type JsonInit = MessageInitShape<typeof ReadToolOutputRequestSchema>["window"];

async function frames(
  source: WindowSource,
  window: JsonInit,
  caps: WindowCaps = defaultWindowCaps,
): Promise<ReadToolOutputResponse[]> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "r",
    handle: source.handle,
    window,
  });
  const out: ReadToolOutputResponse[] = [];
  for await (const frame of readWindow(source, request, caps)) out.push(frame);
  return out;
}

function trailerOf(out: ReadToolOutputResponse[]) {
  const last = out.at(-1);
  return last?.frame.case === "trailer" ? last.frame.value : undefined;
}

function linesOf(out: ReadToolOutputResponse[]) {
  return out.flatMap((f) =>
    f.frame.case === "content" && f.frame.value.body.case === "lines"
      ? f.frame.value.body.value.lines
      : [],
  );
}

const doc = createBufferWindowSource(
  "res_doc",
  "application/json",
  Buffer.from('{"items":[{"id":1,"ok":true},{"id":2,"tags":[]}],"next":null}'),
  false,
  1024,
  2,
);

describe("JSON window", () => {
  it("renders the pretty view with numbered lines, source offsets and the view's size", async () => {
    const out = await frames(doc, { case: "json", value: {} });
    expect(out[0]?.frame.value).toMatchObject({ totalLines: 1n, viewLines: 13n, start: 0n });
    expect(trailerOf(out)?.rendered).toBe(
      [
        "[res_doc] JSON view (pretty-printed) lines 1-13 of 13 (61 bytes)",
        "     1\t{",
        '     2\t  "items": [',
        "     3\t    {",
        '     4\t      "id": 1,',
        '     5\t      "ok": true',
        "     6\t    },",
        "     7\t    {",
        '     8\t      "id": 2,',
        '     9\t      "tags": []',
        "    10\t    }",
        "    11\t  ],",
        '    12\t  "next": null',
        "    13\t}",
        "[end of output]",
        "",
      ].join("\n"),
    );
    expect(
      linesOf(out)
        .map((l) => Number(l.byteOffset))
        .slice(0, 4),
    ).toEqual([0, 1, 10, 11]);
  });

  it("pages forward and back with next_offset, eof and the lines caps", async () => {
    const page = await frames(doc, { case: "json", value: { offset: 3n, limit: 2 } });
    expect(linesOf(page).map((l) => [Number(l.number), l.text])).toEqual([
      [4, '      "id": 1,'],
      [5, '      "ok": true'],
    ]);
    expect(trailerOf(page)).toMatchObject({ nextOffset: 5n, eof: false });
    expect(trailerOf(page)?.rendered).toBe(
      '[res_doc] JSON view (pretty-printed) lines 4-5 of 13 (61 bytes)\n     4\t      "id": 1,\n     5\t      "ok": true\n[more: json offset=5]\n',
    );
    const tail = await frames(doc, {
      case: "json",
      value: { offset: 0n, limit: 2, fromEnd: true },
    });
    expect(linesOf(tail).map((l) => l.text)).toEqual(['  "next": null', "}"]);
    expect(trailerOf(tail)).toMatchObject({ nextOffset: 2n, eof: true });
    expect(trailerOf(tail)?.rendered).toContain("[earlier lines: json offset=2 from_end=true]");
    const capped = await frames(
      doc,
      { case: "json", value: { limit: 50 } },
      { ...defaultWindowCaps, maxWindowLines: 4 },
    );
    expect(trailerOf(capped)).toMatchObject({ returnedLines: 4n, nextOffset: 4n, clipped: true });
    expect(trailerOf(capped)?.rendered).toContain(
      "[window capped at 4 lines; more: json offset=4]",
    );
    const past = await frames(doc, { case: "json", value: { offset: 99n } });
    expect(trailerOf(past)?.rendered).toBe(
      "[res_doc] no lines at offset 99: the JSON view (pretty-printed) has 13 lines\n",
    );
  });

  it("clips long lines with the usual marker pointing into the source", async () => {
    const source = createBufferWindowSource(
      "res_long",
      "application/json",
      Buffer.from(`["${"a".repeat(100)}"]`),
      false,
    );
    const out = await frames(
      source,
      { case: "json", value: {} },
      { ...defaultWindowCaps, maxLineChars: 10 },
    );
    expect(linesOf(out)[1]).toMatchObject({ text: '  "aaaaaaa', clipped: true, byteOffset: 1n });
    expect(trailerOf(out)?.rendered).toContain(
      '     2\t  "aaaaaaa [… line clipped at 10 chars; it continues at byte 9: read bytes offset=9]\n',
    );
  });

  it("pages JSON Lines one compact record per line", async () => {
    const source = createBufferWindowSource(
      "res_jl",
      "application/x-ndjson",
      Buffer.from('{"a": 1}\n{"b": [1, 2]}\n'),
      false,
    );
    const out = await frames(source, { case: "json", value: {} });
    expect(trailerOf(out)?.rendered).toBe(
      '[res_jl] JSON Lines view (one record per line) lines 1-2 of 2 (23 bytes)\n     1\t{"a":1}\n     2\t{"b":[1,2]}\n[end of output]\n',
    );
  });

  it("refuses a payload that is not JSON with FAILED_PRECONDITION saying why", async () => {
    const source = createBufferWindowSource("res_txt", "text/plain", Buffer.from("hello\n"), false);
    const error = await frames(source, { case: "json", value: {} }).then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(error?.code).toBe(Code.FailedPrecondition);
    expect(error?.rawMessage).toContain("neither a JSON document nor JSON Lines");
  });
});

describe("JSON windows of stored records", () => {
  const base: StoredRecord = {
    v: 1,
    handle: "res_old",
    tenant: "dev",
    runId: "r",
    callId: "old",
    name: "old",
    contentType: "application/json",
    sizeBytes: 0,
    observedBytes: 0,
    truncated: false,
    stored: "inline",
    sha256: "0".repeat(64),
    binary: false,
    lineCount: 1,
    preview: { head: "", tail: "", shape: "", omittedBytes: 0, text: "" },
    createdMs: 0,
  };
  const json = Buffer.from('{"a":[1,2]}');

  async function refusal(record: StoredRecord): Promise<ConnectError | undefined> {
    return frames(windowSourceFor(createMemoryBackend(), record, standing), {
      case: "json",
      value: {},
    }).then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
  }

  it("refuses a blob offloaded before JSON views were indexed, saying to offload it again", async () => {
    const backend = createMemoryBackend();
    await backend.put("t/dev/r/r/b/old/u", bytesBody(json));
    const record: StoredRecord = {
      ...base,
      sizeBytes: json.length,
      observedBytes: json.length,
      stored: "blob",
      blob: { key: "t/dev/r/r/b/old/u", stride: 1024, ownerRunId: "r" },
    };
    const error = await frames(windowSourceFor(backend, record, standing), {
      case: "json",
      value: {},
    }).then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(error?.code).toBe(Code.FailedPrecondition);
    expect(error?.rawMessage).toContain("offloaded before this server indexed JSON views");
    // Offloaded again under its own key it would replay this record, still unindexed.
    expect(error?.rawMessage).toContain("as a new output (another call id, or the next attempt");
  });

  it("indexes an inline record offloaded before JSON views on demand", async () => {
    const record: StoredRecord = {
      ...base,
      sizeBytes: json.length,
      observedBytes: json.length,
      inline: json.toString("base64"),
    };
    const out = await frames(windowSourceFor(createMemoryBackend(), record, standing), {
      case: "json",
      value: {},
    });
    expect(linesOf(out).map((l) => l.text)).toEqual([
      "{",
      '  "a": [',
      "    1,",
      "    2",
      "  ]",
      "}",
    ]);
  });

  it("quotes the reason offload recorded for a payload with no view", async () => {
    const error = await refusal({
      ...base,
      inline: "",
      stored: "blob",
      blob: { key: "t/dev/r/r/b/old/u", stride: 1024, ownerRunId: "r" },
      json: {
        kind: "none",
        viewLines: 0,
        stride: 0,
        checkpoints: 0,
        reason: "trailing comma at byte 9",
      },
    });
    expect(error?.code).toBe(Code.FailedPrecondition);
    expect(error?.rawMessage).toContain("(trailing comma at byte 9)");
  });

  it("renders through a stretch nested deeper than checkpoints go a 16 KiB piece a CPU slice", async () => {
    // 70 levels: no checkpoint inside, so a window near the end renders from the start.
    const inner = Array.from({ length: 40_000 }, (_, i) => `{"k":${i}}`).join(",");
    const text = `${"[".repeat(70)}${inner}${"]".repeat(70)}`;
    const deep = createBufferWindowSource(
      "res_deep",
      "application/json",
      Buffer.from(text),
      false,
      1024,
      16,
    );
    const json = deep.json;
    if (json === undefined || "unavailable" in json) throw new Error("no JSON view");
    const slice = countingSlice();
    const request = create(ReadToolOutputRequestSchema, {
      runId: "r",
      handle: deep.handle,
      window: { case: "json", value: { offset: BigInt(json.viewLines - 80) } },
    });
    let last: ReadToolOutputResponse | undefined;
    for await (const frame of readWindow(deep, request, defaultWindowCaps, undefined, slice)) {
      last = frame;
    }
    expect(last?.frame.case === "trailer" && last.frame.value.rendered).toMatch(/"k": 39999/);
    // The whole document is rendered: a slice a 16 KiB piece.
    expect(slice.pauses()).toBeGreaterThanOrEqual(Math.floor(text.length / 16_384));
  });
});
