import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { codeOf } from "../../test/support/code-of.js";
import { createCpuTurns, inPieces, unsliced } from "./cpu-turns.js";

/** Turns on a clock the test moves, granted only when the test says. */
function manualTurns() {
  let now = 0;
  const queued: (() => void)[] = [];
  const turns = createCpuTurns({
    sliceMs: 2,
    clock: () => now,
    schedule: (grant) => queued.push(grant),
  });
  return {
    turns,
    queued,
    advance: (ms: number) => {
      now += ms;
    },
    /** Runs the one grant scheduled, then lets the granted computations run. */
    async grant() {
      const next = queued.shift();
      if (next === undefined) throw new Error("no turn was scheduled");
      next();
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

describe("createCpuTurns", () => {
  it("lets a computation go on while its slice lasts and makes it wait for a turn after", async () => {
    const m = manualTurns();
    const slice = m.turns.begin("a");
    // The first piece starts the slice, however long after begin.
    m.advance(10);
    expect(slice.pause()).toBeUndefined();
    m.advance(1);
    expect(slice.pause()).toBeUndefined();
    m.advance(1);
    let resumed = false;
    const pause = slice.pause()?.then(() => {
      resumed = true;
    });
    expect(pause).toBeDefined();
    await new Promise((resolve) => setImmediate(resolve));
    expect([resumed, m.queued.length]).toEqual([false, 1]);
    await m.grant();
    expect(resumed).toBe(true);
    // The turn starts a new slice.
    m.advance(1);
    expect(slice.pause()).toBeUndefined();
  });

  it("grants one turn a schedule, owners in turn, each owner's computations in turn", async () => {
    const m = manualTurns();
    const order: string[] = [];
    const wait = (owner: string, name: string) => {
      const slice = m.turns.begin(owner);
      slice.pause();
      m.advance(2);
      void slice.pause()?.then(() => order.push(name));
    };
    wait("busy", "busy 1");
    wait("busy", "busy 2");
    wait("busy", "busy 3");
    wait("other", "other 1");
    expect(m.queued).toHaveLength(1);
    for (let k = 0; k < 4; k++) await m.grant();
    expect(order).toEqual(["busy 1", "other 1", "busy 2", "busy 3"]);
    expect(m.queued).toHaveLength(0);
  });

  it("gives up the turn of a computation whose call is cancelled while it waits", async () => {
    const m = manualTurns();
    const abort = new AbortController();
    const cancelled = m.turns.begin("a");
    const next = m.turns.begin("b");
    cancelled.pause();
    next.pause();
    m.advance(2);
    const first = cancelled.pause(abort.signal);
    let served = false;
    void next.pause()?.then(() => {
      served = true;
    });
    abort.abort();
    expect(await codeOf(first ?? Promise.resolve())).toBe(Code.Canceled);
    await m.grant();
    expect(served).toBe(true);
    expect(m.queued).toHaveLength(0);
    expect(await codeOf(cancelled.pause(abort.signal) ?? Promise.resolve())).toBe(Code.Canceled);
  });

  it("hands out bytes in pieces until the work says it has enough", async () => {
    const sizes: number[] = [];
    await inPieces(unsliced, new Uint8Array(10), 4, undefined, (piece) => sizes.push(piece.length));
    expect(sizes).toEqual([4, 4, 2]);
    const taken: number[] = [];
    await inPieces(unsliced, new Uint8Array(10), 4, undefined, (piece) => {
      taken.push(piece.length);
      return taken.length < 2;
    });
    expect(taken).toEqual([4, 4]);
  });
});
