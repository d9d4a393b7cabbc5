import { getEventListeners } from "node:events";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { failureOf } from "../../test/support/code-of.js";
import { collect } from "../../test/support/collect.js";
import { idleRequest } from "./idle-request.js";

/** A request that sends the given messages and then, unless ended, nothing more. */
function request<T>(messages: T[], ended: boolean) {
  let returned = false;
  const source: AsyncIterable<T> = {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        const value = messages.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
        if (ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise<IteratorResult<T>>(() => {});
      },
      return: async () => {
        returned = true;
        return { value: undefined, done: true };
      },
    }),
  };
  return { source, returned: () => returned };
}

describe("idleRequest", () => {
  it("passes a request that arrives and ends through, leaving no listener behind", async () => {
    const signal = new AbortController().signal;
    const r = request([1, 2], true);
    expect(await collect(idleRequest(r.source, 1000, signal, "the M request"))).toEqual([1, 2]);
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
  });

  it("fails DEADLINE_EXCEEDED when the request never comes, or never ends, and lets it go", async () => {
    for (const messages of [[], [1]]) {
      const r = request<number>(messages, false);
      const err = await failureOf(
        collect(idleRequest(r.source, 50, new AbortController().signal, "the M request")),
      );
      expect(err.code).toBe(Code.DeadlineExceeded);
      expect(err.rawMessage).toBe("the M request sent nothing for 50 ms");
      expect(r.returned()).toBe(true);
    }
  });

  it("fails with the call's abort reason at once when the call ends first", async () => {
    const controller = new AbortController();
    const r = request<number>([], false);
    const pending = failureOf(collect(idleRequest(r.source, 60_000, controller.signal, "it")));
    controller.abort();
    expect((await pending).code).toBe(Code.Canceled);
  });
});
