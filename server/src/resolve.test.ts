import { create } from "@bufbuild/protobuf";
import { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import type { Backend, GetOptions } from "./backends/backend.js";
import { bytesBody } from "./backends/body.js";
import { createMemoryBackend } from "./backends/memory.js";
import type { StoredRecord } from "./record.js";
import { windowSourceFor } from "./resolve.js";
import { defaultWindowCaps } from "./window/caps.js";
import { createLineIndexer, encodeLineIndex } from "./window/line-index.js";
import { readWindow } from "./window/read-window.js";
import { createBufferWindowSource, type WindowSource } from "./window/source.js";

/** A record that stands: no store object of it has gone missing on purpose here. */
const standing = async () => undefined;

const stride = 16;
/** 1,000 numbered lines of varying length, 25-65 bytes each. */
const text = Buffer.from(
  Array.from({ length: 1000 }, (_, i) => `line ${i} ${"x".repeat((i * 7) % 41)}\n`).join(""),
);

/** A blob record of `text` with its line index, in a memory backend that logs every ranged get. */
async function storedText(): Promise<{
  source: WindowSource;
  reads: { key: string; offset: number; length: number | undefined }[];
}> {
  const memory = createMemoryBackend();
  const indexer = createLineIndexer(stride);
  indexer.push(text);
  const index = indexer.finish();
  await memory.put("t/dev/r/b/u", bytesBody(text));
  await memory.put("t/dev/r/b/u.idx", bytesBody(encodeLineIndex(index)));
  const reads: { key: string; offset: number; length: number | undefined }[] = [];
  const backend: Backend = {
    ...memory,
    get(key: string, opts?: GetOptions) {
      reads.push({ key, offset: opts?.offset ?? 0, length: opts?.length });
      return memory.get(key, opts);
    },
  };
  const record: StoredRecord = {
    v: 1,
    handle: "res_u",
    tenant: "dev",
    runId: "r",
    callId: "u",
    name: "u",
    contentType: "text/plain",
    sizeBytes: text.length,
    observedBytes: text.length,
    truncated: false,
    stored: "blob",
    sha256: "0".repeat(64),
    binary: false,
    lineCount: index.lineCount,
    preview: { head: "", tail: "", shape: "", omittedBytes: 0, text: "" },
    createdMs: 0,
    blob: { key: "t/dev/r/b/u", indexKey: "t/dev/r/b/u.idx", stride, ownerRunId: "r" },
  };
  return { source: windowSourceFor(backend, record, standing), reads };
}

async function rendered(
  source: WindowSource,
  offset: number,
  limit: number,
  fromEnd = false,
): Promise<string> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "r",
    handle: "res_u",
    window: { case: "lines", value: { offset: BigInt(offset), limit, fromEnd } },
  });
  let text = "";
  for await (const frame of readWindow(source, request, defaultWindowCaps)) {
    if (frame.frame.case === "trailer") text = frame.frame.value.rendered;
  }
  return text;
}

/** The byte offset where 0-based line n starts. */
function lineStart(n: number): number {
  let at = 0;
  for (let i = 0; i < n; i++) at = text.indexOf(10, at) + 1;
  return at;
}

describe("a stored blob's lines window", () => {
  const reference = createBufferWindowSource("res_u", "text/plain", text, false, stride);

  it.each([
    [0, 10, false],
    [500, 10, false],
    [503, 30, false],
    [990, 100, false],
    [0, 7, true],
    [200, 40, true],
  ])(
    "at %i, %i lines (from end %s) reads only the stride-aligned span its lines lie in",
    async (offset, limit, fromEnd) => {
      const { source, reads } = await storedText();
      const shown = await rendered(source, offset, limit, fromEnd);
      expect(shown).toBe(await rendered(reference, offset, limit, fromEnd));
      const data = reads.filter((r) => r.key === "t/dev/r/b/u");
      expect(data).toHaveLength(1);
      const first = fromEnd ? Math.max(0, 1000 - offset - limit) : offset;
      const end = Math.ceil((first + limit) / stride) * stride;
      const from = lineStart(Math.floor(first / stride) * stride);
      expect(data[0]?.offset).toBe(from);
      expect(data[0]?.length).toBe(end < 1000 ? lineStart(end) - from : text.length - from);
    },
  );
});
