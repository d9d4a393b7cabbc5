/**
 * splitParts regroups a stream of chunks into the parts of a multipart upload: every part is
 * exactly `partSize` bytes except the last, which holds the rest (no part is empty; an empty
 * stream yields none).
 *
 * Guarantees: linear work — a part that lies within one chunk is a view of that chunk, and a
 * part that spans chunks is one copy of exactly its bytes, so no byte is copied twice however
 * the stream is chunked; at most one part's worth of chunks is held between parts. The parts
 * alias the chunks, so callers pass chunks that nothing else will change.
 */
export async function* splitParts(
  chunks: AsyncIterable<Buffer>,
  partSize: number,
): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of chunks) {
    let rest = chunk;
    while (pendingBytes + rest.byteLength >= partSize) {
      const take = partSize - pendingBytes;
      pending.push(rest.subarray(0, take));
      rest = rest.subarray(take);
      yield joined(pending, partSize);
      pending = [];
      pendingBytes = 0;
    }
    if (rest.byteLength > 0) {
      pending.push(rest);
      pendingBytes += rest.byteLength;
    }
  }
  if (pendingBytes > 0) yield joined(pending, pendingBytes);
}

function joined(pieces: readonly Buffer[], total: number): Buffer {
  const [only] = pieces;
  return pieces.length === 1 && only !== undefined ? only : Buffer.concat(pieces, total);
}
