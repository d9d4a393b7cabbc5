import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  OffloadHeaderSchema,
  ReadToolOutputRequestSchema,
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
