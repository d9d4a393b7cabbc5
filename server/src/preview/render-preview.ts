import type { Preview } from "@spillway/proto/spillway/v1/types_pb.js";
import { escapeControls } from "../window/render.js";

/** PreviewMeta identifies the offloaded output a preview belongs to. */
export interface PreviewMeta {
  /** The record's handle, which the model repeats back to read more. */
  readonly handle: string;
  /** Display name of the output. */
  readonly name: string;
  /** Declared MIME type. */
  readonly contentType: string;
  /** Bytes stored. */
  readonly size: number;
  /** The tool call's attempt; 2 and up are named in the text, the first is not. */
  readonly attempt?: number;
  /** False for a preview-only output, whose bytes were not stored: no read hint. */
  readonly readable?: boolean;
}

/** The last line of a preview-only output's text, in place of a read hint. */
const notStoredLine =
  "[preview only: the output was not stored, so read_tool_output cannot read it]";

function count(n: number | bigint, unit: string): string {
  return `${n} ${n === 1 || n === 1n ? unit : `${unit}s`}`;
}

/** A block of payload text as its own lines; the separator `\n` supplies a final line break. */
function block(text: string): string {
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

/**
 * renderPreview returns the text a model sees in place of an offloaded output.
 *
 * Layout, lines joined by `\n`, no trailing line break:
 * ```
 * [<handle>] <name> · <content type> · <size> bytes · <line count> lines
 * shape: <shape>                              (JSON only)
 * <head>
 * [… <omitted> bytes omitted …]               (only when bytes were left out)
 * <tail>                                      (only when non-empty)
 * [read more: read_tool_output(handle="<handle>", offset=0)]
 * ```
 * A retry (attempt n >= 2) adds ` · attempt <n>` after the size on the first line, so the
 * model knows which attempt it sees; the first attempt's text is exactly what it was before
 * attempts existed. A preview-only output (`readable: false`) ends with
 * `[preview only: the output was not stored, so read_tool_output cannot read it]` instead of
 * a read hint, since the read would fail. A binary payload renders as `[<handle>] <name> · <content type> · <size> bytes · binary`
 * followed by the bytes-mode hint `[read bytes: read_tool_output(handle="<handle>",
 * bytes=true, offset=0)]`. Head and tail are shown exactly as given (a single final `\n` is
 * absorbed by the line separator); header fields have control characters escaped; the handle in
 * hints is a JSON string literal. Numbers are plain digits and nothing depends on time, so the
 * same preview and meta always render to the same string.
 */
export function renderPreview(preview: Preview, meta: PreviewMeta): string {
  const handle = escapeControls(meta.handle);
  const quoted = JSON.stringify(meta.handle);
  // Unnamed outputs and undeclared content types are left out rather than shown as blanks.
  const ident = [
    `[${handle}]`,
    [
      escapeControls(meta.name),
      escapeControls(meta.contentType),
      count(meta.size, "byte"),
      meta.attempt === undefined || meta.attempt <= 1 ? "" : `attempt ${meta.attempt}`,
    ]
      .filter((part) => part !== "")
      .join(" · "),
  ].join(" ");
  const readable = meta.readable !== false;
  if (preview.binary) {
    return [
      `${ident} · binary`,
      readable
        ? `[read bytes: read_tool_output(handle=${quoted}, bytes=true, offset=0)]`
        : notStoredLine,
    ].join("\n");
  }
  const lines = [`${ident} · ${count(preview.lineCount, "line")}`];
  if (preview.shape !== "") lines.push(`shape: ${preview.shape}`);
  if (preview.head !== "") lines.push(block(preview.head));
  if (preview.omittedBytes > 0n) {
    lines.push(`[… ${count(preview.omittedBytes, "byte")} omitted …]`);
  }
  if (preview.tail !== "") lines.push(block(preview.tail));
  lines.push(
    readable ? `[read more: read_tool_output(handle=${quoted}, offset=0)]` : notStoredLine,
  );
  return lines.join("\n");
}
