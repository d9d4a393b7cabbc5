import { Code, ConnectError } from "@connectrpc/connect";
import type { ReadToolOutputResponse } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { type CpuSlice, unsliced } from "../cpu-turns.js";
import { createJsonViewRenderer } from "../json/json-view-renderer.js";
import type { WindowCaps } from "./caps.js";
import {
  type LinesRequest,
  type LineView,
  linesWindow,
  pushChunks,
  type ShownLine,
} from "./lines.js";
import { renderJsonViewFooter, renderJsonViewHeader, renderNoJsonViewLines } from "./render.js";
import { type JsonViewSource, type WindowSource, windowHeaderFrame } from "./source.js";

/**
 * jsonView is the JSON view of a payload as a LineView: lines fed by a renderer resumed at the
 * checkpoint nearest before the first line wanted, so a window reads the bytes from that
 * checkpoint to its last line and no others.
 */
function jsonView(source: WindowSource, json: JsonViewSource, slice: CpuSlice): LineView {
  return {
    total: json.viewLines,
    // stripAnsi has nothing to remove: JSON text holds no raw control character, so no ESC.
    async *feed(first, _lines, maxLineChars, _stripAnsi, signal, take) {
      const checkpoint = await json.seek(first, signal);
      const stream = await source.read(checkpoint.offset, undefined, signal);
      const renderer = createJsonViewRenderer({
        kind: json.kind,
        checkpoint,
        skipUntil: first,
        maxLineChars,
        onLine: (line) => take(line satisfies ShownLine),
      });
      // The renderer copies what it keeps, so each chunk can serve later reads.
      if (!(yield* pushChunks(source, stream, signal, (chunk) => renderer.push(chunk), slice))) {
        return false;
      }
      renderer.finish();
      return true;
    },
    header: (first, last) =>
      renderJsonViewHeader(source.handle, json.kind, first, last, json.viewLines, source.size),
    footer: renderJsonViewFooter,
    noLines: (offset) => renderNoJsonViewLines(source.handle, json.kind, offset, json.viewLines),
    headerFrame: (start) => {
      // Every window's header, plus the view's own line count.
      const frame = windowHeaderFrame(source, start);
      if (frame.frame.case === "header") frame.frame.value.viewLines = BigInt(json.viewLines);
      return frame;
    },
  };
}

/**
 * jsonWindow streams one window of the JSON view with exactly the caps, paging and trailer of
 * a lines window (see linesWindow); its lines are view lines, each with the source offset of
 * its first token. The source is rendered in `slice`'s turns (CpuTurns), 16 KiB at a time. A
 * payload without a JSON view is FAILED_PRECONDITION, before any frame, naming why.
 */
export async function* jsonWindow(
  source: WindowSource,
  request: LinesRequest,
  caps: WindowCaps,
  withText: boolean,
  signal?: AbortSignal,
  slice: CpuSlice = unsliced,
): AsyncGenerator<ReadToolOutputResponse> {
  const json = source.json;
  if (json === undefined || "unavailable" in json) {
    throw new ConnectError(
      json?.unavailable ?? `"${source.handle}" has no JSON view`,
      Code.FailedPrecondition,
    );
  }
  yield* linesWindow(source, request, caps, withText, signal, jsonView(source, json, slice));
}
