import { type DescMessage, fromBinary, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { BytesFieldPiece } from "@spillway/wire";

/** SplitBytesField names a response bytes field that may be handed out in pieces. */
export interface SplitBytesField {
  /** The response message type. */
  readonly output: DescMessage;
  /** The field numbers, outermost first, of the bytes field. */
  readonly path: readonly number[];
  /** The message that carries one piece of the field's data. */
  message(piece: Uint8Array): MessageShape<DescMessage>;
}

/**
 * Parsed response messages, and their bytes on the wire, held before the response is paused;
 * reading resumes below half of both.
 */
const pauseAtMessages = 256;
const pauseAtBytes = 4 * 1024 * 1024;

/**
 * ResponseQueue holds a response's parsed messages between the connection and the caller, and
 * says when to stop reading: a slow consumer holds the server back through flow control.
 */
export interface ResponseQueue<O extends DescMessage> {
  /**
   * Parses and queues what an envelope reader handed out: a whole message, or a piece of the
   * `split` field's data (as split.message of it). Returns false once the queue is full: the
   * caller pauses its source until `resume` is called. A message that does not parse is an
   * INTERNAL ConnectError ("parse binary: ...").
   */
  push(item: Uint8Array | BytesFieldPiece): boolean;
  /** Drops every queued message (an aborted call hands out nothing more). */
  clear(): void;
  /** Ends the messages: the queued ones are handed out, then `err` is thrown or they end. */
  close(err?: ConnectError): void;
  /** The messages, in order; one consumer. */
  readonly messages: AsyncIterable<MessageShape<O>>;
}

/**
 * createResponseQueue returns the queue of one response's messages of type `output`. `resume` is
 * called when a consumer takes a message and the queue is below half of both bounds (the
 * caller resumes its source if paused).
 */
export function createResponseQueue<O extends DescMessage>(
  output: O,
  split: SplitBytesField | undefined,
  resume: () => void,
): ResponseQueue<O> {
  const queue: { message: MessageShape<O>; bytes: number }[] = [];
  let queuedBytes = 0;
  let closed = false;
  let failure: ConnectError | undefined;
  let wake: (() => void) | undefined;
  return {
    push(item) {
      if (item instanceof Uint8Array) {
        let message: MessageShape<O>;
        try {
          message = fromBinary(output, item);
        } catch (err) {
          throw new ConnectError(`parse binary: ${String(err)}`, Code.Internal);
        }
        queue.push({ message, bytes: item.byteLength });
        queuedBytes += item.byteLength;
      } else if (split !== undefined) {
        queue.push({
          message: split.message(item.piece) as MessageShape<O>,
          bytes: item.piece.byteLength,
        });
        queuedBytes += item.piece.byteLength;
      }
      wake?.();
      return queue.length < pauseAtMessages && queuedBytes < pauseAtBytes;
    },
    clear() {
      queue.length = 0;
      queuedBytes = 0;
    },
    close(err) {
      if (closed) return;
      closed = true;
      failure = err;
      wake?.();
    },
    messages: {
      [Symbol.asyncIterator]: () => ({
        async next(): Promise<IteratorResult<MessageShape<O>>> {
          for (;;) {
            const item = queue.shift();
            if (item !== undefined) {
              queuedBytes -= item.bytes;
              if (queue.length < pauseAtMessages / 2 && queuedBytes < pauseAtBytes / 2) resume();
              return { value: item.message, done: false };
            }
            if (failure !== undefined) throw failure;
            if (closed) return { value: undefined, done: true };
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
          }
        },
      }),
    },
  };
}
