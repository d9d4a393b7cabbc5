import { describe, expect, it } from "vitest";
import { throwInto } from "./throw-into.js";

describe("throwInto", () => {
  it("hands the error to an iterator that takes one and answers with its step", async () => {
    const caught: unknown[] = [];
    async function* catching() {
      try {
        yield 1;
      } catch (err) {
        caught.push(err);
        yield 2;
      }
    }
    const it = catching();
    await it.next();
    const boom = new Error("write failed");
    expect(await throwInto(it, boom)).toEqual({ done: false, value: 2 });
    expect(caught).toEqual([boom]);
  });

  it("closes an iterator without throw, then rethrows", async () => {
    let closed = 0;
    const it: AsyncIterator<number> = {
      next: async () => ({ done: false, value: 1 }),
      return: async () => {
        closed++;
        return { done: true, value: undefined };
      },
    };
    const boom = new Error("write failed");
    await expect(throwInto(it, boom)).rejects.toBe(boom);
    expect(closed).toBe(1);
    const bare: AsyncIterator<number> = { next: async () => ({ done: true, value: undefined }) };
    await expect(throwInto(bare, boom)).rejects.toBe(boom);
  });
});
