import { describe, expect, it } from "vitest";
import { parseDuration, parseSize } from "./size-option.js";

describe("parseSize", () => {
  it.each([
    ["0", 0],
    ["1048576", 1_048_576],
    ["512B", 512],
    ["1kB", 1000],
    ["10MB", 10_000_000],
    ["10GB", 10_000_000_000],
    ["2TB", 2_000_000_000_000],
    ["1KiB", 1024],
    ["64MiB", 64 * 1024 ** 2],
    ["10GiB", 10 * 1024 ** 3],
    ["1TiB", 1024 ** 4],
    ["1.5MiB", 1.5 * 1024 ** 2],
    ["0.1kB", 100],
    ["10 GiB", 10 * 1024 ** 3],
    ["9007199254740991", Number.MAX_SAFE_INTEGER],
  ])("reads %s as %d bytes", (raw, bytes) => {
    expect(parseSize(raw)).toBe(bytes);
  });

  it.each([
    ["", /expected a whole number of bytes/],
    [" ", /expected a whole number of bytes/],
    ["-1", /expected/],
    ["1e9", /expected/],
    ["10G", /unknown unit "G"/],
    ["10K", /unknown unit "K"/],
    ["10KB", /unknown unit "KB"/],
    ["10gib", /unknown unit "gib"/],
    ["10Gb", /unknown unit "Gb"/],
    ["1.5", /not a whole number of bytes/],
    ["1.0001KiB", /not a whole number of bytes/],
    ["9007199254740992", /more than 9007199254740991 bytes/],
    ["9000TiB", /more than 9007199254740991 bytes/],
    ["10  GiB", /expected/],
    ["GiB", /expected/],
    ["0x10", /expected/],
  ])("refuses %j", (raw, message) => {
    expect(() => parseSize(raw)).toThrow(message);
  });
});

describe("parseDuration", () => {
  it.each([
    ["0", 0],
    ["5000", 5000],
    ["250ms", 250],
    ["30s", 30_000],
    ["1.5s", 1500],
    ["5m", 300_000],
    ["2h", 7_200_000],
    ["1d", 86_400_000],
  ])("reads %s as %d ms", (raw, ms) => {
    expect(parseDuration(raw)).toBe(ms);
  });

  it.each([
    ["", /expected a whole number of milliseconds/],
    ["1.5", /not a whole number of milliseconds/],
    ["0.0001s", /not a whole number of milliseconds/],
    ["30S", /unknown unit "S"/],
    ["5min", /unknown unit "min"/],
    ["1h30m", /expected/],
    ["999999999999d", /more than/],
  ])("refuses %j", (raw, message) => {
    expect(() => parseDuration(raw)).toThrow(message);
  });
});
