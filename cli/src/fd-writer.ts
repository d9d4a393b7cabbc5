import { write, writev } from "node:fs";
import { Writable } from "node:stream";

/** Longest wait before writing again to a descriptor that had no room (EAGAIN). */
const MAX_RETRY_MS = 20;

/**
 * createFdWriter is a Writable over an open file descriptor (stdout's, fd 1) whose writes run
 * on the thread pool, so the event loop goes on receiving while a slow reader catches up;
 * `highWaterMark` bytes may queue before `write` returns false. A descriptor that another
 * stream made non-blocking (Node does so to a pipe once process.stdout, or a stderr sharing the
 * pipe, is used) answers EAGAIN when full: the write is retried after a short wait instead of
 * failing. Partial writes are completed. Chunks written while a write runs go out together in
 * one writev(2), uncopied, so a caller may write each piece it receives as it comes. Any other
 * error (EPIPE once the reader has gone) is the stream's error. The descriptor is never closed.
 */
export function createFdWriter(fd: number, highWaterMark: number): Writable {
  /**
   * Writes every byte of `buffers` (one write(2), or one writev(2) for several), finishing a
   * partial write and waiting out EAGAIN, then calls `done`.
   */
  const writeAll = (buffers: Buffer[], done: (err?: Error | null) => void): void => {
    let waitMs = 1;
    const next = () => {
      const after = (err: NodeJS.ErrnoException | null, written: number) => {
        if (err?.code === "EAGAIN") {
          setTimeout(next, waitMs);
          waitMs = Math.min(MAX_RETRY_MS, waitMs * 2);
          return;
        }
        if (err) {
          done(err);
          return;
        }
        waitMs = 1;
        let left = written;
        while (buffers.length > 0 && left >= (buffers[0]?.byteLength ?? 0)) {
          left -= buffers.shift()?.byteLength ?? 0;
        }
        const first = buffers[0];
        if (first === undefined) {
          done();
          return;
        }
        if (left > 0) buffers[0] = first.subarray(left);
        next();
      };
      const [only] = buffers;
      if (buffers.length === 1 && only !== undefined) {
        write(fd, only, 0, only.byteLength, null, after);
      } else {
        writev(fd, buffers, null, after);
      }
    };
    next();
  };
  return new Writable({
    highWaterMark,
    write(chunk: Buffer, _encoding, done) {
      writeAll([chunk], done);
    },
    writev(chunks, done) {
      writeAll(
        chunks.map(({ chunk }) => chunk as Buffer),
        done,
      );
    },
  });
}
