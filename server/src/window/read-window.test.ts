import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ReadToolOutputRequestSchema,
  type ReadToolOutputResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { readWindow } from "./read-window.js";
import { createBufferWindowSource, type WindowSource } from "./source.js";

/** A window as a request literal spells it. */
type WindowInit = MessageInitShape<typeof ReadToolOutputRequestSchema>["window"];

/** Collects every frame of a window. */
async function frames(
  source: WindowSource,
  window: WindowInit,
  extra: { omitRendered?: boolean; renderedOnly?: boolean; signal?: AbortSignal } = {},
): Promise<ReadToolOutputResponse[]> {
  const request = create(ReadToolOutputRequestSchema, {
    runId: "r",
    handle: source.handle,
    window,
    omitRendered: extra.omitRendered ?? false,
    renderedOnly: extra.renderedOnly ?? false,
  });
  const out: ReadToolOutputResponse[] = [];
  for await (const frame of readWindow(source, request, undefined, extra.signal)) out.push(frame);
  return out;
}

/** Returns the ConnectError code a promise rejects with. */
async function codeOf(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err).code;
  }
  return undefined;
}

const text = createBufferWindowSource(
  "res_txt",
  "text/plain",
  Buffer.from("one\ntwo\nthree\n"),
  false,
);
const binary = createBufferWindowSource("out_c_file:a.bin", "", Buffer.from([0, 1, 2, 0xfe]), true);

describe("readWindow", () => {
  it("reads lines from the start when no window is set", async () => {
    const out = await frames(text, { case: undefined });
    expect(out.map((f) => f.frame.case)).toEqual(["header", "content", "trailer"]);
    const header = out[0]?.frame.value;
    expect(header).toMatchObject({ handle: "res_txt", totalBytes: 14n, totalLines: 3n, start: 0n });
    const trailer = out[2]?.frame.case === "trailer" ? out[2].frame.value : undefined;
    expect(trailer?.rendered).toBe(
      "[res_txt] lines 1-3 of 3 (14 bytes)\n     1\tone\n     2\ttwo\n     3\tthree\n[end of output]\n",
    );
    expect(trailer?.returnedLines).toBe(3n);
    expect(trailer?.returnedBytes).toBe(14n);
    expect(trailer?.eof).toBe(true);
  });

  it("leaves the rendered text out when asked", async () => {
    const out = await frames(
      text,
      { case: "lines", value: { offset: 1n } },
      { omitRendered: true },
    );
    const trailer = out.at(-1)?.frame;
    expect(trailer?.case === "trailer" && trailer.value.rendered).toBe("");
    expect(trailer?.case === "trailer" && trailer.value.returnedLines).toBe(2n);
  });

  it("sends only the header and the trailer of any window when asked, the same ones", async () => {
    const json = createBufferWindowSource(
      "res_j",
      "application/json",
      Buffer.from('{"a":[1,{"b":2}],"c":"three"}'),
      false,
    );
    for (const [source, window] of [
      [text, { case: "lines", value: { offset: 1n, limit: 1 } }],
      [text, { case: "lines", value: { offset: 0n, fromEnd: true } }],
      [text, { case: "search", value: { pattern: "t", contextLines: 1 } }],
      [text, { case: "bytes", value: { offset: 2n, limit: 5n } }],
      [json, { case: "json", value: {} }],
      [json, { case: "jsonPath", value: { query: "$..b" } }],
    ] as [WindowSource, WindowInit][]) {
      const whole = await frames(source, window);
      const only = await frames(source, window, { renderedOnly: true });
      expect(whole.filter((f) => f.frame.case === "content").length).toBeGreaterThan(0);
      expect(only).toEqual(whole.filter((f) => f.frame.case !== "content"));
    }
  });

  it("reports binary payloads in lines and search mode and reads them in bytes mode", async () => {
    for (const window of [
      { case: undefined },
      { case: "search", value: { pattern: "x", skip: 0n } },
    ] as WindowInit[]) {
      const out = await frames(binary, window);
      expect(out.map((f) => f.frame.case)).toEqual(["header", "trailer"]);
      expect(out[0]?.frame.case === "header" && out[0].frame.value.binary).toBe(true);
      const trailer = out[1]?.frame;
      expect(trailer?.case === "trailer" && trailer.value.rendered).toBe(
        "[out_c_file:a.bin] binary output (4 bytes, application/octet-stream); read it with bytes=true\n",
      );
    }
    const bytes = await frames(binary, { case: "bytes", value: { offset: 0n } });
    const data = bytes.find((f) => f.frame.case === "content")?.frame;
    const body = data?.case === "content" ? data.value.body.value : undefined;
    expect(body instanceof Uint8Array && Array.from(body)).toEqual([0, 1, 2, 0xfe]);
  });

  it("refuses negative offsets and bad limits with INVALID_ARGUMENT before any frame", async () => {
    expect(await codeOf(frames(text, { case: "lines", value: { offset: -1n } }))).toBe(
      Code.InvalidArgument,
    );
    expect(await codeOf(frames(text, { case: "bytes", value: { offset: -5n } }))).toBe(
      Code.InvalidArgument,
    );
    expect(await codeOf(frames(text, { case: "lines", value: { offset: 0n, limit: 0 } }))).toBe(
      Code.InvalidArgument,
    );
    expect(
      await codeOf(
        frames(binary, { case: "search", value: { pattern: "(", regex: true, skip: 0n } }),
      ),
    ).toBe(Code.InvalidArgument);
  });

  it("stops with CANCELED when the caller aborts", async () => {
    const controller = new AbortController();
    controller.abort();
    expect(
      await codeOf(
        frames(text, { case: "lines", value: { offset: 0n } }, { signal: controller.signal }),
      ),
    ).toBe(Code.Canceled);
  });

  it("stops reading once a lines window is full", async () => {
    let pulled = 0;
    const endless: WindowSource = {
      ...text,
      size: Number.MAX_SAFE_INTEGER,
      lineCount: Number.MAX_SAFE_INTEGER,
      read: async () =>
        (async function* () {
          for (;;) {
            pulled++;
            yield Buffer.from("line\n".repeat(100));
          }
        })(),
      seekLine: async () => ({ line: 0, offset: 0 }),
    };
    const out = await frames(endless, { case: "lines", value: { offset: 0n, limit: 250 } });
    const trailer = out.at(-1)?.frame;
    expect(trailer?.case === "trailer" && trailer.value.nextOffset).toBe(250n);
    expect(pulled).toBe(3);
  });
});
