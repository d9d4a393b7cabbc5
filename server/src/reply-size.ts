/**
 * MAX_REPLY_BYTES bounds every message the service sends (a unary reply, each frame of a
 * stream), encoded: the receive limit that gRPC clients have unless told otherwise (grpc-js,
 * grpcio and grpc-go all default to 4 MiB), so a client generated from the proto alone can
 * read every answer.
 */
export const MAX_REPLY_BYTES = 4 * 1024 * 1024;

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
