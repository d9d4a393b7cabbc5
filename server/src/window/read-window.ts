import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type ReadToolOutputRequest,
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { type CpuSlice, unsliced } from "../cpu-turns.js";
import { parseJsonPath } from "../json/jsonpath-parse.js";
import { bytesWindow } from "./bytes.js";
import { defaultWindowCaps, type WindowCaps } from "./caps.js";
import { jsonWindow } from "./json.js";
import { jsonPathWindow } from "./json-path.js";
import { linesWindow } from "./lines.js";
import { renderBinary } from "./render.js";
import { createLineMatcher, type SearchRequest, searchWindow } from "./search.js";
import { type WindowSource, windowHeaderFrame } from "./source.js";

/**
 * Converts a position of a request (an int64 the proto bounds to 0..2^53 - 1, which request
 * validation enforces before a window is read) to a number; one out of that range, from a
 * caller that skipped validation, is INVALID_ARGUMENT rather than a number the client never sent.
 */
function count(value: bigint, field: string): number {
  if (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ConnectError(
      `${field} must be between 0 and ${Number.MAX_SAFE_INTEGER}, got ${value}`,
      Code.InvalidArgument,
    );
  }
  return Number(value);
}

/** The frames of a lines or search window over a binary payload: no content, a pointer to bytes mode. */
function* binaryWindow(source: WindowSource, withText: boolean): Generator<ReadToolOutputResponse> {
  yield windowHeaderFrame(source, 0);
  yield create(ReadToolOutputResponseSchema, {
    frame: {
      case: "trailer",
      value: {
        eof: true,
        rendered: withText ? renderBinary(source.handle, source.size, source.contentType) : "",
      },
    },
  });
}

/**
 * readWindow turns a stored payload into one bounded window.
 *
 * Guarantees: it yields exactly one header frame, zero or more content frames (none when
 * `renderedOnly`) and exactly one trailer frame, whose `rendered` is the deterministic model-facing text ("" when
 * `omitRendered`), without terminal escape sequences unless `keep_ansi` (as are the texts of
 * lines and matches; bytes-mode data frames are the stored bytes either way); it streams the payload and never holds more of it than the caps allow; an
 * unset window is a lines window from line 0; lines and search windows over a binary payload
 * carry no content and say to use bytes mode; a JSONPath window over a payload that is not
 * JSON is FAILED_PRECONDITION. A bad request (negative offsets, an invalid pattern or JSONPath
 * query) is INVALID_ARGUMENT before any frame; a cancelled `signal` is CANCELED. Searches and
 * JSONPath scans run in `slice`'s turns of the event loop (CpuTurns).
 */
export async function* readWindow(
  source: WindowSource,
  request: ReadToolOutputRequest,
  caps: WindowCaps = defaultWindowCaps,
  signal?: AbortSignal,
  slice: CpuSlice = unsliced,
): AsyncGenerator<ReadToolOutputResponse> {
  const frames = windowFrames(source, request, caps, signal, slice);
  if (!request.renderedOnly) {
    yield* frames;
    return;
  }
  for await (const frame of frames) if (frame.frame.case !== "content") yield frame;
}

/** The frames of the window request asks for, content frames included; see readWindow. */
async function* windowFrames(
  source: WindowSource,
  request: ReadToolOutputRequest,
  caps: WindowCaps,
  signal: AbortSignal | undefined,
  slice: CpuSlice,
): AsyncGenerator<ReadToolOutputResponse> {
  const withText = !request.omitRendered;
  const window = request.window;
  switch (window.case) {
    case undefined:
    case "lines": {
      const lines = {
        offset: window.case === "lines" ? count(window.value.offset, "lines.offset") : 0,
        limit: window.value?.limit,
        fromEnd: window.value?.fromEnd ?? false,
        keepAnsi: request.keepAnsi,
        renderedOnly: request.renderedOnly,
      };
      if (source.binary) yield* binaryWindow(source, withText);
      else yield* linesWindow(source, lines, caps, withText, signal);
      return;
    }
    case "bytes": {
      const bytes = {
        offset: count(window.value.offset, "bytes.offset"),
        limit: window.value.limit === undefined ? undefined : Number(window.value.limit),
        keepAnsi: request.keepAnsi,
      };
      yield* bytesWindow(source, bytes, caps, withText, signal);
      return;
    }
    case "json": {
      const lines = {
        offset: count(window.value.offset, "json.offset"),
        limit: window.value.limit,
        fromEnd: window.value.fromEnd,
        renderedOnly: request.renderedOnly,
      };
      yield* jsonWindow(source, lines, caps, withText, signal, slice);
      return;
    }
    case "search": {
      const search: SearchRequest = {
        pattern: window.value.pattern,
        regex: window.value.regex,
        ignoreCase: window.value.ignoreCase,
        maxMatches: window.value.maxMatches,
        skip: count(window.value.skip, "search.skip"),
        contextLines: window.value.contextLines,
        after:
          window.value.after === undefined
            ? undefined
            : {
                offset: count(window.value.after.byteOffset, "search.after.byte_offset"),
                line: count(window.value.after.line, "search.after.line"),
                matchesBefore: count(
                  window.value.after.matchesBefore,
                  "search.after.matches_before",
                ),
                check: window.value.after.check,
              },
        keepAnsi: request.keepAnsi,
      };
      const matcher = createLineMatcher(search);
      if (source.binary) yield* binaryWindow(source, withText);
      else {
        yield* searchWindow(source, search, matcher, caps, withText, signal, undefined, slice);
      }
      return;
    }
    case "jsonPath": {
      const query = parseJsonPath(window.value.query);
      yield* jsonPathWindow(
        source,
        {
          text: window.value.query,
          query,
          maxMatches: window.value.maxMatches,
          skip: count(window.value.skip, "json_path.skip"),
        },
        caps,
        withText,
        signal,
        slice,
      );
      return;
    }
  }
}
