import {
  create,
  type DescMessage,
  isMessage,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type JsonNode,
  JsonNodeSchema,
  type Line,
  LineSchema,
  type Match,
  MatchSchema,
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
  type WindowContent,
  type WindowContentSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { fieldBytes, MAX_REPLY_BYTES } from "./reply-size.js";

/**
 * What a content frame adds around the elements of its list: three nested length-delimited
 * fields (the frame's content, the body, the list), each a tag and a length of up to 5 bytes.
 */
const contentOverhead = 3 * 6;

/**
 * boundFrames passes a window's frames on, splitting every content frame that would encode to
 * more than `bytes` into several that do not, in order: the same lines, matches, nodes or data,
 * in more frames. Header and trailer frames pass as they are (the window caps bound them).
 *
 * A search window's matches each carry their context lines, so a line near many matches
 * travels in each of them: with 20 lines of context, one frame of 64 matches over lines of
 * 2,000 four-byte characters came to 4.5 MB, which a client with gRPC's default 4 MiB receive
 * limit cannot read. One element (a match with its context, a line, a node) is never split: the
 * window caps keep lines and matches far below the bound, and a JSONPath node whose path alone
 * passes it (a hundred levels of 60,000-byte member names) ends the window with
 * RESOURCE_EXHAUSTED rather than a frame no default client could read.
 */
export async function* boundFrames(
  frames: AsyncIterable<ReadToolOutputResponse>,
  bytes: number = MAX_REPLY_BYTES,
): AsyncGenerator<ReadToolOutputResponse> {
  for await (const frame of frames) {
    if (frame.frame.case !== "content") yield frame;
    else yield* splitContent(frame, frame.frame.value, bytes - contentOverhead);
  }
}

function splitContent(
  frame: ReadToolOutputResponse,
  content: WindowContent,
  room: number,
): ReadToolOutputResponse[] {
  const body = content.body;
  switch (body.case) {
    case "data": {
      const data = body.value;
      if (data.byteLength <= room) return [frame];
      const parts: ReadToolOutputResponse[] = [];
      for (let at = 0; at < data.byteLength; at += room) {
        parts.push(contentFrame({ case: "data", value: data.subarray(at, at + room) }));
      }
      return parts;
    }
    case "lines":
      return split(body.value.lines, LineSchema, lineBound, room, frame, (lines) =>
        contentFrame({ case: "lines", value: { lines } }),
      );
    case "matches":
      return split(body.value.matches, MatchSchema, matchBound, room, frame, (matches) =>
        contentFrame({ case: "matches", value: { matches } }),
      );
    case "nodes":
      return split(body.value.nodes, JsonNodeSchema, nodeBound, room, frame, (nodes) =>
        contentFrame({ case: "nodes", value: { nodes } }),
      );
    default:
      return [frame];
  }
}

/**
 * The frame itself when `bound` says its elements fit `room` (the common case, measured without
 * encoding anything), else frames of as many whole elements as fit, measured exactly.
 */
function split<S extends DescMessage>(
  items: readonly MessageShape<S>[],
  schema: S,
  bound: (item: MessageShape<S>) => number,
  room: number,
  frame: ReadToolOutputResponse,
  make: (part: MessageShape<S>[]) => ReadToolOutputResponse,
): ReadToolOutputResponse[] {
  let most = 0;
  for (const item of items) most += bound(item);
  if (most <= room) return [frame];
  const parts: ReadToolOutputResponse[] = [];
  let part: MessageShape<S>[] = [];
  let used = 0;
  for (const item of items) {
    const size = fieldBytes(toBinary(schema, item).byteLength);
    if (size > room) throw tooLarge(schema, item, size);
    if (part.length > 0 && used + size > room) {
      parts.push(make(part));
      part = [];
      used = 0;
    }
    part.push(item);
    used += size;
  }
  if (part.length > 0) parts.push(make(part));
  return parts;
}

/** The refusal of a window element that alone would pass the reply bound. */
function tooLarge<S extends DescMessage>(
  schema: S,
  item: MessageShape<S>,
  size: number,
): ConnectError {
  const node = isMessage(item, JsonNodeSchema) ? item : undefined;
  const where =
    node === undefined
      ? ""
      : ` (its path alone is ${node.path.length} characters); read its value in bytes mode: offset=${node.byteOffset}, limit=${node.byteLength}`;
  return new ConnectError(
    `a ${schema.name} of ${size} bytes is more than one reply holds (${MAX_REPLY_BYTES} bytes)${where}`,
    Code.ResourceExhausted,
  );
}

function contentFrame(
  body: MessageInitShape<typeof WindowContentSchema>["body"],
): ReadToolOutputResponse {
  return create(ReadToolOutputResponseSchema, { frame: { case: "content", value: { body } } });
}

// Upper bounds of an element's bytes in its list: a UTF-16 unit is at most 3 bytes of UTF-8,
// an int64 at most a 10-byte varint, a length at most 5 bytes, each field's tag 1 byte.

/** A Line: number, text, clipped, byte_offset, and its own tag and length. */
function lineBound(line: Line): number {
  return 11 + (6 + 3 * line.text.length) + 2 + 11 + 6;
}

/** A Match: its line and its context lines, and its own tag and length. */
function matchBound(match: Match): number {
  let bytes = 6 + (match.line === undefined ? 0 : lineBound(match.line));
  for (const line of match.before) bytes += lineBound(line);
  for (const line of match.after) bytes += lineBound(line);
  return bytes;
}

/** A JsonNode: path, value, clipped, byte_offset, byte_length, and its own tag and length. */
function nodeBound(node: JsonNode): number {
  return 6 + 3 * node.path.length + (6 + 3 * node.value.length) + 2 + 11 + 11 + 6;
}
