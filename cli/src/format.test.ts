import { describe, expect, it } from "vitest";
import { formatBytes, formatSeconds, jsonLine, parseDuration, table, visible } from "./format.js";

describe("formatBytes", () => {
  it("uses binary units with three significant digits", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(1023)).toBe("1023 B");
    expect(formatBytes(1536)).toBe("1.50 KiB");
    expect(formatBytes(64 * 1024 * 1024)).toBe("64.0 MiB");
    expect(formatBytes(768 * 1024 * 1024)).toBe("768 MiB");
    expect(formatBytes(1024 ** 3)).toBe("1.00 GiB");
  });
});

describe("formatSeconds", () => {
  it("shows seconds, then minutes and seconds, then hours and minutes", () => {
    expect(formatSeconds(0.4)).toBe("0s");
    expect(formatSeconds(59)).toBe("59s");
    expect(formatSeconds(185)).toBe("3m05s");
    expect(formatSeconds(7620)).toBe("2h07m");
  });
});

describe("parseDuration", () => {
  it("reads seconds and sums of s, m, h, d and w", () => {
    expect(parseDuration("3600")).toBe(3600);
    expect(parseDuration("90s")).toBe(90);
    expect(parseDuration("15m")).toBe(900);
    expect(parseDuration("1h30m")).toBe(5400);
    expect(parseDuration("7d")).toBe(604_800);
    expect(parseDuration("1w")).toBe(604_800);
  });

  it("refuses zero, signs, fractions and unknown units", () => {
    for (const text of ["0", "0s", "-5", "1.5h", "2y", "h", "", "1h 30m"]) {
      expect(parseDuration(text), text).toBeUndefined();
    }
  });
});

describe("table", () => {
  it("pads every column but the last, two spaces apart", () => {
    expect(table(["A", "BB", "C"], [["xyz", "1", "last column"]])).toBe(
      "A    BB  C\nxyz  1   last column\n",
    );
  });
});

describe("visible and jsonLine", () => {
  it("escape what a terminal acts on and leave other text alone", () => {
    expect(visible("a\u001b[2Jb\u0007\u007f\u009b\u0085\u202ec")).toBe(
      "a\\x1b[2Jb\\x07\\x7f\\u009b\\u0085\\u202ec",
    );
    expect(visible("tab\there")).toBe("tab\\x09here");
    expect(visible("tab\there", true)).toBe("tab\there");
    expect(visible("naïve 日本 ✓ \\x1b")).toBe("naïve 日本 ✓ \\x1b");
    expect(table(["A", "B"], [["x\u001by", "z"]])).toBe("A       B\nx\\x1by  z\n");
  });

  it("jsonLine parses back to the value, with no raw C1, DEL or bidi control", () => {
    const value = { name: "a\u001b\u007f\u009b\u202eb", n: 1 };
    const line = jsonLine(value);
    expect(line).toBe('{"name":"a\\u001b\\u007f\\u009b\\u202eb","n":1}\n');
    expect(JSON.parse(line)).toEqual(value);
  });
});
