import { create } from "@bufbuild/protobuf";
import { PreviewSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import { describe, expect, it } from "vitest";
import { renderPreview } from "./render-preview.js";

const meta = { handle: "res_call1", name: "search", contentType: "text/plain", size: 1234 };

describe("renderPreview", () => {
  it("renders head, omission marker, tail and the read hint", () => {
    const preview = create(PreviewSchema, {
      head: "first line\r\nsecond",
      tail: "last line\n",
      lineCount: 42n,
      omittedBytes: 1200n,
    });
    expect(renderPreview(preview, meta)).toBe(
      [
        "[res_call1] search · text/plain · 1234 bytes · 42 lines",
        "first line\r\nsecond",
        "[… 1200 bytes omitted …]",
        "last line",
        '[read more: read_tool_output(handle="res_call1", offset=0)]',
      ].join("\n"),
    );
  });

  it("names a retry's attempt and renders the first attempt as it always did", () => {
    const preview = create(PreviewSchema, { head: "one\n", lineCount: 1n });
    const first = renderPreview(preview, { ...meta, size: 4 });
    expect(renderPreview(preview, { ...meta, size: 4, attempt: 1 })).toBe(first);
    expect(renderPreview(preview, { ...meta, size: 4, attempt: 0 })).toBe(first);
    expect(renderPreview(preview, { ...meta, handle: "res@3_call1", size: 4, attempt: 3 })).toBe(
      [
        "[res@3_call1] search · text/plain · 4 bytes · attempt 3 · 1 line",
        "one",
        '[read more: read_tool_output(handle="res@3_call1", offset=0)]',
      ].join("\n"),
    );
    const binary = create(PreviewSchema, { binary: true });
    expect(
      renderPreview(binary, { ...meta, handle: "res@2_call1", size: 4, attempt: 2 }).split("\n")[0],
    ).toBe("[res@2_call1] search · text/plain · 4 bytes · attempt 2 · binary");
  });

  it("renders a whole payload without marker or tail", () => {
    const preview = create(PreviewSchema, { head: "one\n", lineCount: 1n });
    expect(renderPreview(preview, { ...meta, size: 4 })).toBe(
      [
        "[res_call1] search · text/plain · 4 bytes · 1 line",
        "one",
        '[read more: read_tool_output(handle="res_call1", offset=0)]',
      ].join("\n"),
    );
  });

  it("adds the shape line for JSON", () => {
    const preview = create(PreviewSchema, {
      head: '{"a":1}',
      shape: "{a: number}",
      lineCount: 3n,
    });
    expect(renderPreview(preview, { ...meta, contentType: "application/json", size: 14 })).toBe(
      [
        "[res_call1] search · application/json · 14 bytes · 3 lines",
        "shape: {a: number}",
        '{"a":1}',
        '[read more: read_tool_output(handle="res_call1", offset=0)]',
      ].join("\n"),
    );
  });

  it("renders binary payloads with the bytes-mode hint", () => {
    const preview = create(PreviewSchema, { binary: true, lineCount: 7n, omittedBytes: 1234n });
    expect(renderPreview(preview, { ...meta, contentType: "image/png" })).toBe(
      [
        "[res_call1] search · image/png · 1234 bytes · binary",
        '[read bytes: read_tool_output(handle="res_call1", bytes=true, offset=0)]',
      ].join("\n"),
    );
  });

  it("points a preview-only output at nothing to read", () => {
    const text = create(PreviewSchema, { head: "kept\n", lineCount: 1n });
    expect(renderPreview(text, { ...meta, size: 5, readable: false })).toBe(
      [
        "[res_call1] search · text/plain · 5 bytes · 1 line",
        "kept",
        "[preview only: the output was not stored, so read_tool_output cannot read it]",
      ].join("\n"),
    );
    const binary = create(PreviewSchema, { binary: true, lineCount: 0n });
    expect(renderPreview(binary, { ...meta, readable: false })).toBe(
      [
        "[res_call1] search · text/plain · 1234 bytes · binary",
        "[preview only: the output was not stored, so read_tool_output cannot read it]",
      ].join("\n"),
    );
  });

  it("keeps the header on one line and quotes the handle in hints", () => {
    const preview = create(PreviewSchema, { head: "x", lineCount: 1n });
    const text = renderPreview(preview, {
      handle: 'out_c_"q"',
      name: "evil\nname",
      contentType: "text/plain",
      size: 1,
    });
    expect(text.split("\n")[0]).toBe('[out_c_"q"] evil\\u000aname · text/plain · 1 byte · 1 line');
    expect(text.endsWith('[read more: read_tool_output(handle="out_c_\\"q\\"", offset=0)]')).toBe(
      true,
    );
  });

  it("renders the same preview to the same string", () => {
    const build = () =>
      create(PreviewSchema, { head: "h", tail: "t", lineCount: 9n, omittedBytes: 5n });
    expect(renderPreview(build(), meta)).toBe(renderPreview(build(), meta));
  });
});
