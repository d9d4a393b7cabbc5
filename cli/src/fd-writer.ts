import { write } from "node:fs";
import { Writable } from "node:stream";

/** Longest wait before writing again to a descriptor that had no room (EAGAIN). */
const MAX_RETRY_MS = 20;

/**
 * createFdWriter is a Writable over an open file descriptor (stdout's, fd 1) whose writes run
 * on the thread pool, so the event loop goes on receiving while a slow reader catches up;
 * `highWaterMark` bytes may queue before `write` returns false. A descriptor that another
 * stream made non-blocking (Node does so to a pipe once process.stdout, or a stderr sharing the
 * pipe, is used) answers EAGAIN when full: the write is retried after a short wait instead of
 * failing. Partial writes are completed. Any other error (EPIPE once the reader has gone) is the
 * stream's error. The descriptor is never closed.
 */
export function createFdWriter(fd: number, highWaterMark: number): Writable {
  return new Writable({
    highWaterMark,
    write(chunk: Buffer, _encoding, done) {
      let offset = 0;
      let waitMs = 1;
      const next = () => {
        write(fd, chunk, offset, chunk.byteLength - offset, null, (err, written) => {
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
          offset += written;
          if (offset < chunk.byteLength) next();
          else done();
        });
      };
      next();
    },
  });
}
