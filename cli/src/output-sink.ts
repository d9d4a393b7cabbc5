/** OutputSink writes a command's output with backpressure and notices a reader that left. */
export interface OutputSink {
  /**
   * Writes `chunk`; resolves once the stream has room for more (at once, unless the stream's
   * buffer is full). Rejects with the stream's error once it has failed.
   */
  write(chunk: Uint8Array | string): Promise<void>;
  /**
   * Aborted when the stream fails: pass it to the read feeding this sink so the read stops
   * too. Its reason is the stream's error.
   */
  readonly signal: AbortSignal;
  /** True once the reader has gone (EPIPE): the command ends quietly with exit 0, as cat | head does. */
  readonly readerGone: () => boolean;
}

/**
 * createOutputSink wraps a writable stream (stdout). A write that fills the stream's buffer
 * waits for `drain`, so a slow reader slows the download instead of growing this process's
 * memory. A reader that closes the pipe (EPIPE, `spillway cat ... | head`) aborts `signal`
 * and sets `readerGone`; every other stream error aborts it with that error.
 */
export function createOutputSink(stream: NodeJS.WritableStream): OutputSink {
  const controller = new AbortController();
  let gone = false;
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") gone = true;
    controller.abort(err);
  });
  const failed = (): Error => controller.signal.reason as Error;
  return {
    signal: controller.signal,
    readerGone: () => gone,
    write(chunk) {
      if (controller.signal.aborted) return Promise.reject(failed());
      if (stream.write(chunk)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const onAbort = () => {
          stream.off("drain", onDrain);
          reject(failed());
        };
        const onDrain = () => {
          controller.signal.removeEventListener("abort", onAbort);
          resolve();
        };
        stream.once("drain", onDrain);
        controller.signal.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}
