import type { Socket } from "node:net";

/** The most bytes of an HTTP/1.1 connection handed to Node's request parser at once. */
export const HTTP1_PIECE_BYTES = 4096;

/**
 * feedInPieces makes an HTTP/1.1 connection's bytes reach Node's HTTP server (whose `data`
 * listeners must already be attached) at most HTTP1_PIECE_BYTES at a time, stopping between two
 * pieces once the socket is paused or destroyed and going on when it is resumed.
 *
 * Node's parser runs a whole socket read (64 KiB) at once and builds a request and a response
 * object for every request in it before a handler can refuse any: 64 KiB of 26-byte pipelined
 * requests built about 2,500 pairs (4 MB), and then took 30 ms to abort them when the connection
 * closed. Fed in pieces, a connection that a handler destroys (see MAX_PIPELINED_REQUESTS) has at
 * most one piece parsed past that point, and the bytes not yet fed wait raw (at most one read).
 * Listening to `data` also makes Node stop reading the socket from C++ (it "unconsumes" it), so
 * every byte passes here.
 */
export function feedInPieces(socket: Socket): void {
  const parsers = socket.listeners("data") as ((chunk: Buffer) => void)[];
  if (parsers.length === 0) return;
  for (const parse of parsers) socket.removeListener("data", parse);
  let pending: Buffer | undefined;
  const feed = () => {
    while (pending !== undefined && !socket.destroyed && !socket.isPaused()) {
      const piece = pending.subarray(0, HTTP1_PIECE_BYTES);
      pending = piece.length < pending.length ? pending.subarray(piece.length) : undefined;
      for (const parse of parsers) parse(piece);
    }
  };
  socket.on("data", (chunk: Buffer) => {
    pending = pending === undefined ? chunk : Buffer.concat([pending, chunk]);
    feed();
  });
  socket.on("resume", feed);
}
