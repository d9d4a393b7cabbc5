import { getEventListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { failureOf } from "../../test/support/code-of.js";
import { createIdleStreamReader } from "./idle-stream.js";

/** A stream whose messages the test hands in one at a time. */
function manualStream<T>() {
  const waiting: ((result: IteratorResult<T>) => void)[] = [];
  const ready: IteratorResult<T>[] = [];
  const iterator: AsyncIterator<T> = {
    next: () => {
      const result = ready.shift();
      if (result !== undefined) return Promise.resolve(result);
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
  const deliver = (result: IteratorResult<T>) => {
    const resolve = waiting.shift();
    if (resolve === undefined) ready.push(result);
    else resolve(result);
  };
  return {
    iterator,
    send: (value: T) => deliver({ value, done: false }),
    end: () => deliver({ value: undefined, done: true }),
  };
}

describe("createIdleStreamReader", () => {
  it("hands out the stream's messages in order, then its end", async () => {
    const s = manualStream<number>();
    const reader = createIdleStreamReader(s.iterator, 1000, new AbortController().signal, "it");
    s.send(1);
    s.send(2);
    s.end();
    expect(await reader.next()).toEqual({ value: 1, done: false });
    expect(await reader.next()).toEqual({ value: 2, done: false });
    expect((await reader.next()).done).toBe(true);
    reader.close();
  });

  it("fails DEADLINE_EXCEEDED when the client is quiet for idleMs of a read", async () => {
    const s = manualStream<number>();
    const reader = createIdleStreamReader(s.iterator, 50, new AbortController().signal, "the X");
    const err = await failureOf(reader.next());
    expect(err.code).toBe(Code.DeadlineExceeded);
    expect(err.rawMessage).toBe("the X sent nothing for 50 ms");
    reader.close();
  });

  it("does not count the time the server spends between reads", async () => {
    const s = manualStream<number>();
    const reader = createIdleStreamReader(s.iterator, 50, new AbortController().signal, "it");
    s.send(1);
    await reader.next();
    // A slow server step, three idle limits long, while the client's next message is queued.
    s.send(2);
    await sleep(150);
    expect(await reader.next()).toEqual({ value: 2, done: false });
    // And the limit applies afresh to the next wait.
    const pending = reader.next();
    await sleep(20);
    s.send(3);
    expect(await pending).toEqual({ value: 3, done: false });
    reader.close();
  });

  it("fails with the abort's reason at once, and refuses reads after it", async () => {
    const s = manualStream<number>();
    const abort = new AbortController();
    const reader = createIdleStreamReader(s.iterator, 60_000, abort.signal, "it");
    const pending = reader.next();
    abort.abort(new ConnectError("gone", Code.Canceled));
    expect((await failureOf(pending)).rawMessage).toBe("gone");
    expect((await failureOf(reader.next())).code).toBe(Code.Canceled);
    reader.close();
  });

  it("leaves no abort listener behind once closed", () => {
    const abort = new AbortController();
    const reader = createIdleStreamReader(
      manualStream<number>().iterator,
      1000,
      abort.signal,
      "it",
    );
    expect(getEventListeners(abort.signal, "abort")).toHaveLength(1);
    reader.close();
    expect(getEventListeners(abort.signal, "abort")).toHaveLength(0);
  });
});
