import { describe, expect, it } from "vitest";
import { createKnownDirectories } from "./known-directories.js";

describe("createKnownDirectories", () => {
  it("trusts a directory only until its time-to-live runs out", () => {
    let clock = 0;
    const known = createKnownDirectories(1_000, 10, () => clock);
    known.add("/r/t");
    clock = 999;
    expect(known.has("/r/t")).toBe(true);
    clock = 1_000;
    expect(known.has("/r/t")).toBe(false);
  });

  it("forgets a directory with everything below it, and nothing beside it", () => {
    const known = createKnownDirectories(1_000, 10, () => 0);
    for (const dir of ["/r/a", "/r/a/b", "/r/a/b/c", "/r/ab", "/r/x"]) known.add(dir);
    known.forget("/r/a");
    expect(["/r/a", "/r/a/b", "/r/a/b/c", "/r/ab", "/r/x"].map((d) => known.has(d))).toEqual([
      false,
      false,
      false,
      true,
      true,
    ]);
  });

  it("never holds more than its maximum", () => {
    const known = createKnownDirectories(1_000, 3, () => 0);
    for (const dir of ["/1", "/2", "/3", "/4"]) known.add(dir);
    expect(["/1", "/2", "/3", "/4"].filter((d) => known.has(d))).toEqual(["/4"]);
  });
});
