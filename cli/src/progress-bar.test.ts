import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createProgressBar, renderProgress } from "./progress-bar.js";

const MiB = 1024 * 1024;

describe("the progress bar", () => {
  it("shows the bar, percentage, bytes, rate and ETA with a known total", () => {
    expect(renderProgress("build.log", 256 * MiB, 1024 * MiB, 2000, 100)).toBe(
      "build.log [##########------------------------------]  25%  256 MiB / 1.00 GiB  128 MiB/s  ETA 6s",
    );
  });

  it("shows bytes and rate alone when the total is unknown (stdin)", () => {
    expect(renderProgress("stdin", 3 * MiB, undefined, 1000, 80)).toBe(
      "stdin  3.00 MiB  3.00 MiB/s",
    );
  });

  it("fits a narrow terminal", () => {
    expect(renderProgress("build.log", MiB, 4 * MiB, 1000, 40).length).toBeLessThanOrEqual(40);
  });

  it("redraws in place at most every interval, and ends the line when finished", () => {
    let out = "";
    const stream = Object.assign(
      new Writable({
        write(chunk, _encoding, done) {
          out += String(chunk);
          done();
        },
      }),
      { columns: 0 },
    );
    let now = 0;
    const bar = createProgressBar({ stream, label: "f", total: 100, now: () => now });
    bar.advance(10);
    now = 50;
    bar.advance(10);
    now = 150;
    bar.advance(80);
    bar.finish();
    const frames = out.split("\r").filter((f) => f !== "");
    expect(frames).toHaveLength(3);
    expect(frames[0]).toContain(" 10%");
    expect(frames[1]).toContain("100%");
    expect(out.endsWith("\u001b[K\n")).toBe(true);
  });
});
