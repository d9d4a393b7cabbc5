import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { type CpuSlice, inPieces, unsliced } from "../cpu-turns.js";
import { createJsonTokenizer } from "../json/json-tokenizer.js";
import { isJsonLinesContentType } from "../json/json-view-index.js";
import type { JsonPathQuery } from "../json/jsonpath-ast.js";
import { createJsonPathStream, jsonPathBuffering } from "../json/jsonpath-stream.js";
import { clipString, countChars, defaultMaxMatches, type WindowCaps } from "./caps.js";
import { readCompactJson } from "./json-compact.js";
import {
  type JsonPathHeader,
  type NodeRow,
  renderJsonPathHeader,
  renderNodeRow,
  renderNoNodes,
} from "./json-path-render.js";
import { renderSearchFooter, searchFooterOf, widestSearchFooterChars } from "./render.js";
import { type WindowSource, windowHeaderFrame } from "./source.js";

/** JsonPathRequest is a JSONPath window with its int64 fields already converted. */
export interface JsonPathRequest {
  /** The query as the client wrote it (shown in the rendered text). */
  readonly text: string;
  /** The parsed query. */
  readonly query: JsonPathQuery;
  /** Nodes asked for; undefined means the default (100). Capped by caps.maxMatches. */
  readonly maxMatches: number | undefined;
  /** Matched nodes to skip before the first one returned. */
  readonly skip: number;
}

/**
 * jsonPathMaxBufferBytes bounds the payload bytes of any one value a query holds in memory
 * while streaming: a filter's candidate child, the array a negative index or slice selects
 * from, or the whole document for a filter with an absolute `$` query. Past it the window is
 * RESOURCE_EXHAUSTED.
 */
export const jsonPathMaxBufferBytes = 8 * 1024 * 1024;

/**
 * A JSONPath window's in-memory evaluation may do jsonPathWindowSteps of work plus
 * jsonPathStepsPerByte for every byte it has read (JsonPathBudget): enough for a filter to
 * test every record of any document, while a few hundred bytes of nested arrays under nested
 * descendant filters (whose work grows with the fifth power of the depth) are refused within
 * a fraction of a second instead of holding the event loop for minutes.
 */
export const jsonPathWindowSteps = 16_000_000;

/** See jsonPathWindowSteps. */
export const jsonPathStepsPerByte = 64;

/**
 * True when the payload is JSON Lines (queried as the array of its records): as offload found
 * it (the JSON view's kind), or, for a payload stored before JSON views were indexed, as its
 * content type declares.
 */
function isJsonLines(source: WindowSource): boolean {
  const view = source.json;
  if (view !== undefined && "kind" in view) return view.kind === "lines";
  return isJsonLinesContentType(source.contentType);
}

/** Nodes per content frame. */
const nodesPerFrame = 64;

/** The bytes tokenized between two checks of the slice: about a millisecond's work. */
const tokenizePieceBytes = 64 * 1024;

/**
 * jsonPathWindow streams one JSONPath window: a header frame, content frames of matched nodes
 * (normalized path, compact value clipped at maxLineChars, byte range) in document order, and
 * a trailer whose text lists them in the style of a search window.
 *
 * Guarantees: the payload is tokenized as it streams (JSON Lines records as one array); memory
 * is bounded by the path depth, the kept nodes and jsonPathMaxBufferBytes per held value, never
 * the payload; reading stops once skip + max_matches nodes are complete, and `total_matches`
 * is set (and `next_offset` unset when nothing is left) only when the whole payload was
 * scanned. A payload that is not JSON is FAILED_PRECONDITION before any frame (up to the point
 * the scan reached); `clipped` is set when a value was clipped, the character cap cut the
 * window, or a request above caps.maxMatches was capped. The scan runs in `slice`'s turns
 * (CpuTurns).
 */
export async function* jsonPathWindow(
  source: WindowSource,
  request: JsonPathRequest,
  caps: WindowCaps,
  withText: boolean,
  signal?: AbortSignal,
  slice: CpuSlice = unsliced,
): AsyncGenerator<ReadToolOutputResponse> {
  if (request.maxMatches !== undefined && request.maxMatches < 1) {
    throw new ConnectError(
      `max_matches must be at least 1, got ${request.maxMatches}`,
      Code.InvalidArgument,
    );
  }
  if (source.binary) {
    throw new ConnectError(
      `not JSON: ${source.handle} is binary output; a JSONPath query needs a JSON or JSON Lines payload`,
      Code.FailedPrecondition,
    );
  }
  const maxMatches = Math.min(request.maxMatches ?? defaultMaxMatches, caps.maxMatches);
  const overCap = request.maxMatches !== undefined && request.maxMatches > caps.maxMatches;
  const { skip } = request;
  const { maxLineChars, maxWindowChars } = caps;
  const lines = isJsonLines(source);
  if (jsonPathBuffering(request.query).root && source.size > jsonPathMaxBufferBytes) {
    throw new ConnectError(
      `JSONPath query compares with an absolute $ query inside a filter, which holds the whole document; ${source.handle} has ${source.size} bytes, over the server's bound of ${jsonPathMaxBufferBytes}`,
      Code.ResourceExhausted,
    );
  }

  const budget = { left: jsonPathWindowSteps };
  const stream = createJsonPathStream(request.query, {
    skip,
    limit: maxMatches,
    maxBufferBytes: jsonPathMaxBufferBytes,
    lines,
    budget,
  });
  const tokenizer = createJsonTokenizer(stream.events, { lines });
  let exhausted = true;
  for await (const chunk of await source.read(0, undefined, signal)) {
    if (signal?.aborted) throw new ConnectError("window read was cancelled", Code.Canceled);
    // In pieces, pausing when the slice is over: tokenizing a chunk of a megabyte holds the
    // event loop for tens of milliseconds.
    await inPieces(slice, chunk, tokenizePieceBytes, signal, (piece) => {
      budget.left += jsonPathStepsPerByte * piece.length;
      tokenizer.write(piece);
      return !stream.satisfied;
    });
    source.release(chunk);
    if (stream.satisfied) {
      exhausted = false;
      break;
    }
  }
  if (exhausted) {
    tokenizer.end();
    stream.finish(source.size);
  }

  const describe = (count: number, total: number | undefined): JsonPathHeader => ({
    handle: source.handle,
    query: request.text,
    skip,
    count,
    total,
  });
  const total = exhausted ? stream.total : undefined;
  const fits = (rowsChars: number, count: number): boolean => {
    const next = skip + count;
    const footer = widestSearchFooterChars(next, overCap, caps);
    const header = countChars(renderJsonPathHeader(describe(count, Math.max(total ?? 0, next))));
    return header + rowsChars + footer <= maxWindowChars;
  };

  const rows: NodeRow[] = [];
  let text = "";
  let textChars = 0;
  let charClipped = false;
  let valueClipped = false;
  for (const node of stream.nodes) {
    const records = lines && node.offset === 0 && node.path === "$";
    const value = await readCompactJson(
      source,
      node.offset,
      node.length,
      maxLineChars,
      records,
      signal,
    );
    const row: NodeRow = {
      path: node.path,
      value: value.text,
      clipped: value.clipped,
      byteOffset: node.offset,
      byteLength: node.length,
    };
    const line = renderNodeRow(row, maxLineChars);
    if (rows.length > 0 && !fits(textChars + countChars(line), rows.length + 1)) {
      charClipped = true;
      break;
    }
    rows.push(row);
    text += line;
    textChars += countChars(line);
    if (row.clipped) valueClipped = true;
  }

  yield windowHeaderFrame(source, 0);
  for (let at = 0; at < rows.length; at += nodesPerFrame) {
    yield create(ReadToolOutputResponseSchema, {
      frame: {
        case: "content",
        value: {
          body: {
            case: "nodes",
            value: {
              nodes: rows.slice(at, at + nodesPerFrame).map((r) => ({
                path: r.path,
                value: r.value,
                clipped: r.clipped,
                byteOffset: BigInt(r.byteOffset),
                byteLength: BigInt(r.byteLength),
              })),
            },
          },
        },
      },
    });
  }

  const returned = rows.length;
  const next =
    total !== undefined && skip + returned >= total && !charClipped ? undefined : skip + returned;
  const countCapped = next !== undefined && !charClipped && overCap && returned === maxMatches;
  let rendered: string;
  if (returned === 0) {
    rendered = renderNoNodes(describe(0, total)) + renderSearchFooter({ kind: "end" });
  } else {
    const footer = searchFooterOf(next, charClipped, countCapped, caps);
    rendered = renderJsonPathHeader(describe(returned, total)) + text + renderSearchFooter(footer);
  }
  yield create(ReadToolOutputResponseSchema, {
    frame: {
      case: "trailer",
      value: {
        returnedBytes: BigInt(rows.reduce((sum, r) => sum + r.byteLength, 0)),
        returnedMatches: BigInt(returned),
        nextOffset: next === undefined ? undefined : BigInt(next),
        clipped: charClipped || countCapped || valueClipped,
        eof: exhausted,
        totalMatches: total === undefined ? undefined : BigInt(total),
        rendered: withText ? clipString(rendered, maxWindowChars) : "",
      },
    },
  });
}
