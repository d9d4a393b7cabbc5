import { Code, ConnectError } from "@connectrpc/connect";

/**
 * MAX_REPLY_BYTES bounds every message the service sends (a unary reply, each frame of a
 * stream), encoded: the receive limit that gRPC clients have unless told otherwise (grpc-js,
 * grpcio and grpc-go all default to 4 MiB), so a client generated from the proto alone can
 * read every answer.
 */
export const MAX_REPLY_BYTES = 4 * 1024 * 1024;

/**
 * MAX_WINDOW_CHARS_FOR_REPLIES is the largest max_window_chars whose windows fit a reply: a
 * trailer is its rendered text (at most 4 bytes a character) and under 200 bytes besides
 * (counts, next offset, search cursor), 4,000,200 bytes at this cap.
 */
export const MAX_WINDOW_CHARS_FOR_REPLIES = 1_000_000;

/**
 * checkCapsFitReplies refuses (INVALID_ARGUMENT) window caps whose trailers could pass
 * MAX_REPLY_BYTES, with the message the server's other cap checks use.
 */
export function checkCapsFitReplies(caps: { readonly maxWindowChars: number }): void {
  if (caps.maxWindowChars > MAX_WINDOW_CHARS_FOR_REPLIES) {
    throw new ConnectError(
      `window cap maxWindowChars (${caps.maxWindowChars}) must be at most ${MAX_WINDOW_CHARS_FOR_REPLIES}, so that a window's text fits a reply of ${MAX_REPLY_BYTES} bytes`,
      Code.InvalidArgument,
    );
  }
}

/** varintBytes is the length of `n` (0 <= n < 2^53) as a protobuf varint. */
export function varintBytes(n: number): number {
  let bytes = 1;
  for (let rest = n; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes++;
  return bytes;
}

/**
 * fieldBytes is the encoded size of a length-delimited field numbered below 16 (a one-byte
 * tag) holding `length` bytes: a message field, a string, a repeated element.
 */
export function fieldBytes(length: number): number {
  return 1 + varintBytes(length) + length;
}
