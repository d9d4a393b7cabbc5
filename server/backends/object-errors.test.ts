import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { alreadyExists, notFound } from "./object-errors.js";

describe("object errors", () => {
  it("notFound is NOT_FOUND naming the key, and leaves the stack-trace limit as it was", () => {
    const before = Error.stackTraceLimit;
    const err = notFound("t/a/b");
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(Code.NotFound);
    expect(err.rawMessage).toBe('object not found (key "t/a/b")');
    expect(Error.stackTraceLimit).toBe(before);
  });

  it("alreadyExists is ALREADY_EXISTS naming the key", () => {
    const err = alreadyExists("t/a/b");
    expect(err.code).toBe(Code.AlreadyExists);
    expect(err.rawMessage).toBe('object already exists (key "t/a/b")');
  });
});
