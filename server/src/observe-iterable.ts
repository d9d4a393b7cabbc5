import { throwInto } from "./throw-into.js";

/** IterableEnding says how iteration of an observed iterable stopped. */
export type IterableEnding =
  | { readonly kind: "done" }
  | { readonly kind: "failed"; readonly error: unknown }
  | { readonly kind: "abandoned" };

/** IterableObserver is told about each item of a wrapped iterable and, once, how it ended. */
export interface IterableObserver<T> {
  /** Called with every item before the consumer receives it. */
  readonly onItem?: (item: T) => void;
  /**
   * Called exactly once: `done` when the source finished, `failed` when it threw, `abandoned`
   * when the consumer stopped early (`break`, `return()`).
   */
  readonly onEnd?: (ending: IterableEnding) => void;
}

/**
 * observeIterable returns an iterable that yields the source's items unchanged and reports them
 * to the observer. It guarantees `onEnd` runs once whichever way iteration stops, including a
 * consumer that abandons the stream before reading it to the end; an error thrown in by the
 * consumer goes to the source, or closes it (`return`) when it cannot take one, as `yield*`
 * does.
 */
export function observeIterable<T>(
  source: AsyncIterable<T>,
  observer: IterableObserver<T>,
): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      const it = source[Symbol.asyncIterator]();
      let ended = false;
      const end = (ending: IterableEnding) => {
        if (ended) return;
        ended = true;
        observer.onEnd?.(ending);
      };
      return {
        async next() {
          try {
            const step = await it.next();
            if (step.done === true) end({ kind: "done" });
            else observer.onItem?.(step.value);
            return step;
          } catch (error) {
            end({ kind: "failed", error });
            throw error;
          }
        },
        async return(value?: unknown) {
          end({ kind: "abandoned" });
          const step = await it.return?.(value);
          return step ?? { done: true, value: undefined };
        },
        async throw(error?: unknown) {
          end({ kind: "failed", error });
          return throwInto(it, error);
        },
      };
    },
  };
}
