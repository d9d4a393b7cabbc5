import { finished, type Readable } from "node:stream";

/**
 * readableChunks iterates a byte stream's chunks one by one, each the Buffer the stream emitted,
 * never merged. Node's own async iterator calls `read()`, which joins everything buffered into
 * a new Buffer: while an offload hashed and wrote, its request body was copied once more that
 * way, and the copies, allocated outside V8's heap, brought on full collections.
 *
 * Guarantees: chunks come in order; at most about `pauseAtBytes` wait here (the stream is
 * paused once they are queued, so the transport's flow control holds the sender back, and
 * resumed once the consumer has taken some); the stream's error, or a close before its end
 * (ERR_STREAM_PREMATURE_CLOSE, as Node's iterator reports it), is thrown instead of any chunk
 * still waiting; a consumer that stops early (`break`, `return()`) leaves the stream paused with
 * the rest unread and no listener of this iterator's on it, for its owner to drain or destroy
 * (Node's iterator destroys it; the gRPC handler answers first and then drains the rest).
 */
export function readableChunks(stream: Readable, pauseAtBytes: number): AsyncIterable<Buffer> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<Buffer> {
      const queue: Buffer[] = [];
      let queuedBytes = 0;
      let ended = false;
      let failure: Error | undefined;
      let wake: (() => void) | undefined;
      const onData = (chunk: Buffer) => {
        queue.push(chunk);
        queuedBytes += chunk.byteLength;
        if (queuedBytes >= pauseAtBytes) stream.pause();
        wake?.();
      };
      stream.on("data", onData);
      const stopWatching = finished(stream, { writable: false }, (err) => {
        if (err === undefined || err === null) ended = true;
        else failure = err;
        stream.off("data", onData);
        wake?.();
      });
      return {
        async next() {
          for (;;) {
            if (failure !== undefined) {
              queue.length = 0;
              throw failure;
            }
            const chunk = queue.shift();
            if (chunk !== undefined) {
              queuedBytes -= chunk.byteLength;
              if (queuedBytes < pauseAtBytes && stream.isPaused() && !ended) stream.resume();
              return { done: false, value: chunk };
            }
            if (ended) return { done: true, value: undefined };
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
          }
        },
        async return() {
          queue.length = 0;
          stream.off("data", onData);
          stopWatching();
          if (!ended) stream.pause();
          return { done: true, value: undefined };
        },
      };
    },
  };
}
