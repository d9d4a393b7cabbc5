import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ForkRunRequestSchema,
  OffloadHeaderSchema,
  ReadToolOutputRequestSchema,
  SetRunTtlRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { validateRequest } from "./validation.js";

function messageOf(fn: () => void): string {
  try {
    fn();
  } catch (err) {
    const e = ConnectError.from(err);
    expect(e.code).toBe(Code.InvalidArgument);
    return e.rawMessage;
  }
  throw new Error("expected a violation");
}

const header = (key: { tenant?: string; runId?: string; callId?: string }, extra = {}) =>
  create(OffloadHeaderSchema, {
    key: { tenant: "t", runId: "r", callId: "c", ...key },
    ...extra,
  });

describe("validateRequest", () => {
  it("accepts a well-formed header", () => {
    expect(() =>
      validateRequest(OffloadHeaderSchema, header({}, { slot: "file:out/a.txt" })),
    ).not.toThrow();
  });

  it.each([
    [{ runId: "" }, "key.run_id: must be at least 1 characters"],
    [{ runId: ".." }, "key.run_id: must not be in list [., ..]"],
    [{ callId: "a/b" }, "key.call_id: does not match regex pattern"],
    [{ callId: "a\\b" }, "key.call_id: does not match regex pattern"],
    [{ tenant: "a\u0000" }, "key.tenant: does not match regex pattern"],
    [{ tenant: "x".repeat(65) }, "key.tenant: must be at most 64 bytes"],
  ])("names the field and the rule for %j", (key, expected) => {
    expect(messageOf(() => validateRequest(OffloadHeaderSchema, header(key)))).toContain(expected);
  });

  it.each([
    [
      "nanos (1999999999) must be within ±999999999",
      { seconds: 31_622_399n, nanos: 1_999_999_999 },
    ],
    ["nanos (1999999999) must be within ±999999999", { seconds: 0n, nanos: 1_999_999_999 }],
    ["nanos (-5) must have the sign of seconds (1)", { seconds: 1n, nanos: -5 }],
    ["nanos (5) must have the sign of seconds (-1)", { seconds: -1n, nanos: 5 }],
    [
      "seconds (400000000000) must be within ±315576000000",
      { seconds: 400_000_000_000n, nanos: 0 },
    ],
  ])("refuses a malformed Duration its rule would measure wrongly: %s", (reason, ttl) => {
    const setTtl = create(SetRunTtlRequestSchema, { runId: "r", ttl });
    expect(messageOf(() => validateRequest(SetRunTtlRequestSchema, setTtl))).toBe(`ttl: ${reason}`);
    const fork = create(ForkRunRequestSchema, { parentRunId: "p", childRunId: "c", ttl });
    expect(messageOf(() => validateRequest(ForkRunRequestSchema, fork))).toBe(`ttl: ${reason}`);
    const offload = header({}, { ttl });
    expect(messageOf(() => validateRequest(OffloadHeaderSchema, offload, "header."))).toBe(
      `header.ttl: ${reason}`,
    );
  });

  it("accepts well-formed Durations at the rule's bound", () => {
    const ttl = { seconds: 31_622_399n, nanos: 999_999_999 };
    expect(() =>
      validateRequest(SetRunTtlRequestSchema, create(SetRunTtlRequestSchema, { runId: "r", ttl })),
    ).not.toThrow();
  });

  it("reports every violation at once, with the caller's prefix", () => {
    const message = messageOf(() =>
      validateRequest(
        OffloadHeaderSchema,
        header({ runId: ".", callId: "" }, { expectedSha256: "nope", slot: "secrets" }),
        "header.",
      ),
    );
    for (const field of [
      "header.key.run_id",
      "header.key.call_id",
      "header.expected_sha256",
      "header.slot",
    ]) {
      expect(message).toContain(field);
    }
  });

  it("bounds windows and patterns", () => {
    const req = create(ReadToolOutputRequestSchema, {
      runId: "r",
      handle: "res_c",
      window: { case: "search", value: { pattern: "x".repeat(2000), contextLines: 99 } },
    });
    const message = messageOf(() => validateRequest(ReadToolOutputRequestSchema, req));
    expect(message).toContain("search.pattern");
    expect(message).toContain("search.context_lines");
  });

  it("refuses a window asking for rendered text alone and for none of it", () => {
    const req = (renderedOnly: boolean, omitRendered: boolean) =>
      create(ReadToolOutputRequestSchema, {
        runId: "r",
        handle: "res_c",
        renderedOnly,
        omitRendered,
      });
    const message = messageOf(() => validateRequest(ReadToolOutputRequestSchema, req(true, true)));
    // A rule of the whole message: no field path before it.
    expect(message).toBe("only one of rendered_only, omit_rendered can be set");
    for (const [only, omit] of [
      [true, false],
      [false, true],
      [false, false],
    ] as const) {
      expect(() => validateRequest(ReadToolOutputRequestSchema, req(only, omit))).not.toThrow();
    }
  });
});
