import { Code, ConnectError } from "@connectrpc/connect";
import RE2 from "re2";
import { describe, expect, it } from "vitest";
import { createRegexMeter } from "./search.js";

/** A clock whose first readings advance by `first` (ms) in turn, every later one by `rest`. */
function clock(first: readonly number[], rest: number): () => number {
  let t = 0;
  let i = 0;
  return () => {
    t += first[i++] ?? rest;
    return t;
  };
}

const chunk = Buffer.from("a line of a tool's output\nthe NEEDLE is here\nand the end\n");

describe("createRegexMeter", () => {
  it("does not refuse a fast pattern whose one call the process was paused in", () => {
    // The first call's readings 30 ms apart (descheduled, a collection), every later one fast.
    const meter = createRegexMeter("NEEDLE", "gm", clock([0, 30], 0.0001));
    const expression = new RE2("NEEDLE", "gm");
    expect(meter.exec(expression, chunk, 0)).toBe(chunk.indexOf("NEEDLE"));
    expect(meter.exec(expression, chunk, chunk.indexOf("and the"))).toBe(-1);
  });

  it("refuses a pattern every call of which is slow, timed again or not", () => {
    const meter = createRegexMeter("NEEDLE", "gm", clock([], 30));
    const expression = new RE2("NEEDLE", "gm");
    let refused: unknown;
    try {
      meter.exec(expression, chunk, 0);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.InvalidArgument);
    expect((refused as ConnectError).rawMessage).toMatch(/is too slow for RE2 on this output/);
  });
});
