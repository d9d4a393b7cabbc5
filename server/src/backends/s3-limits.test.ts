import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { checkPartSize } from "./s3-limits.js";

const MiB = 1024 * 1024;

describe("checkPartSize", () => {
  it("defaults to 8 MiB and accepts S3's bounds, 5 MiB and 5 GiB", () => {
    expect(checkPartSize(undefined)).toBe(8 * MiB);
    expect(checkPartSize(5 * MiB)).toBe(5 * MiB);
    expect(checkPartSize(5 * 1024 * MiB)).toBe(5 * 1024 * MiB);
  });

  it.each([5 * MiB - 1, 5 * 1024 * MiB + 1, 6.5 * MiB + 0.5, Number.NaN])(
    "refuses %d with INVALID_ARGUMENT",
    (size) => {
      expect(() => checkPartSize(size)).toThrow(
        expect.objectContaining({ code: Code.InvalidArgument }),
      );
    },
  );
});
