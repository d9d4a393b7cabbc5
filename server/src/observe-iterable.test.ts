import { describe, expect, it } from "vitest";
import { type IterableEnding, observeIterable } from "./observe-iterable.js";

async function* numbers(failAfter?: number) {
  for (let i = 1; i <= 3; i++) {
    if (i === failAfter) throw new Error("boom");
    yield i;
  }
}

describe("observeIterable", () => {
  it("passes items through and reports done once", async () => {
    const seen: number[] = [];
    const endings: IterableEnding[] = [];
    const out: number[] = [];
    const it = observeIterable(numbers(), {
      onItem: (n) => seen.push(n),
      onEnd: (e) => endings.push(e),
    });
    for await (const n of it) out.push(n);
    expect(out).toEqual([1, 2, 3]);
    expect(seen).toEqual([1, 2, 3]);
    expect(endings).toEqual([{ kind: "done" }]);
  });

  it("reports a failing source with its error", async () => {
    const endings: IterableEnding[] = [];
    const it = observeIterable(numbers(2), { onEnd: (e) => endings.push(e) });
    await expect(async () => {
      for await (const _ of it) {
        // drain
      }
    }).rejects.toThrow("boom");
    expect(endings).toHaveLength(1);
    expect(endings[0]?.kind).toBe("failed");
  });

  it("reports a consumer that stops early as abandoned, and closes the source", async () => {
    const endings: IterableEnding[] = [];
    let sourceClosed = false;
    async function* source() {
      try {
        yield* numbers();
      } finally {
        sourceClosed = true;
      }
    }
    for await (const n of observeIterable(source(), { onEnd: (e) => endings.push(e) })) {
      if (n === 1) break;
    }
    expect(endings).toEqual([{ kind: "abandoned" }]);
    expect(sourceClosed).toBe(true);
  });

  it("hands an error thrown in to the source, or closes a source that cannot take one", async () => {
    // A source with only next and return, as the deadline interceptor's wrapper is: the error
    // must still close it, as yield* would, or what it holds for the call is never let go.
    let closed = 0;
    const plain: AsyncIterable<number> = {
      [Symbol.asyncIterator]: () => ({
        next: async () => ({ done: false, value: 1 }),
        return: async () => {
          closed++;
          return { done: true, value: undefined };
        },
      }),
    };
    const endings: IterableEnding[] = [];
    const it = observeIterable(plain, { onEnd: (e) => endings.push(e) })[Symbol.asyncIterator]();
    await it.next();
    const boom = new Error("write failed");
    await expect(it.throw?.(boom)).rejects.toBe(boom);
    expect(closed).toBe(1);
    expect(endings).toEqual([{ kind: "failed", error: boom }]);

    const caught: unknown[] = [];
    async function* catching() {
      try {
        yield 1;
      } catch (err) {
        caught.push(err);
      }
    }
    const it2 = observeIterable(catching(), {})[Symbol.asyncIterator]();
    await it2.next();
    expect(await it2.throw?.(boom)).toEqual({ done: true, value: undefined });
    expect(caught).toEqual([boom]);
  });
});
