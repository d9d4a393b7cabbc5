import { describe, expect, it } from "vitest";
import { createTurnQueue } from "./turn-queue.js";

describe("createTurnQueue", () => {
  it("hands items out owner by owner, each owner's first come first served", () => {
    const queue = createTurnQueue<string>();
    for (const item of ["a1", "a2", "a3"]) queue.push("a", item);
    queue.push("b", "b1");
    const order: string[] = [];
    for (let turn = queue.shift(); turn !== undefined; turn = queue.shift()) {
      order.push(turn.item);
      // An owner's item put back after its turn waits behind every other owner's.
      if (turn.item === "b1") queue.push("b", "b2");
    }
    expect(order).toEqual(["a1", "b1", "a2", "b2", "a3"]);
    expect(queue.isEmpty()).toBe(true);
  });

  it("takes out one item or all of them", () => {
    const queue = createTurnQueue<string>();
    queue.push("a", "a1");
    queue.push("b", "b1");
    queue.push("b", "b2");
    queue.remove("a", "a1");
    queue.remove("b", "missing");
    expect(queue.shift()).toEqual({ owner: "b", item: "b1" });
    queue.push("c", "c1");
    expect(queue.clear()).toEqual(["b2", "c1"]);
    expect([queue.isEmpty(), queue.shift()]).toEqual([true, undefined]);
  });
});
