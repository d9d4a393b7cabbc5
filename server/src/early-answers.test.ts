import type { Http2Session } from "node:http2";
import { describe, expect, it } from "vitest";
import { createEarlyAnswers } from "./early-answers.js";

/** A connection stands in as a plain object: the accounting only keys on it. */
const connection = () => ({}) as Http2Session;

describe("early answers", () => {
  it("answers early until a connection's burst is spent, then waits, refilling at the rate", () => {
    let t = 0;
    const early = createEarlyAnswers({ burst: 3, perSecond: 2 }, () => t);
    const a = connection();
    const b = connection();
    for (let i = 0; i < 3; i++) {
      expect(early.mustWait(a)).toBe(false);
      early.answered(a);
    }
    expect(early.mustWait(a)).toBe(true);
    // Another connection has its own budget.
    expect(early.mustWait(b)).toBe(false);
    t += 500;
    expect(early.mustWait(a)).toBe(false);
    early.answered(a);
    expect(early.mustWait(a)).toBe(true);
    // Never more than the burst, however long the connection was quiet.
    t += 60_000;
    for (let i = 0; i < 3; i++) early.answered(a);
    expect(early.mustWait(a)).toBe(true);
  });

  it("never waits for a call whose connection is gone", () => {
    const early = createEarlyAnswers({ burst: 1, perSecond: 0 });
    early.answered(undefined);
    expect(early.mustWait(undefined)).toBe(false);
  });
});
