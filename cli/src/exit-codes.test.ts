import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { COMMON_EXIT_CODES, exitCodeOf, usageError } from "./exit-codes.js";

describe("exit codes", () => {
  it("are 10 + the gRPC code for a refused call, 2 for usage, 3 for anything local", () => {
    expect(exitCodeOf(new ConnectError("x", Code.NotFound))).toBe(15);
    expect(exitCodeOf(new ConnectError("x", Code.PermissionDenied))).toBe(17);
    expect(exitCodeOf(new ConnectError("x", Code.Unauthenticated))).toBe(26);
    expect(exitCodeOf(usageError("bad"))).toBe(2);
    expect(exitCodeOf(new Error("ENOENT"))).toBe(3);
  });

  it("list the common codes by their gRPC names for the usage text", () => {
    expect(COMMON_EXIT_CODES).toEqual([
      ["INVALID_ARGUMENT", 13],
      ["NOT_FOUND", 15],
      ["ALREADY_EXISTS", 16],
      ["PERMISSION_DENIED", 17],
      ["RESOURCE_EXHAUSTED", 18],
      ["UNAVAILABLE", 24],
      ["UNAUTHENTICATED", 26],
    ]);
  });
});
