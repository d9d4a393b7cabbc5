import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { parseJsonPath } from "./jsonpath-parse.js";

/** The error a query is refused with. */
function refusal(query: string): ConnectError {
  try {
    parseJsonPath(query);
  } catch (err) {
    if (err instanceof ConnectError) return err;
    throw err;
  }
  throw new Error(`accepted ${query}`);
}

describe("parseJsonPath", () => {
  it("refuses an invalid query with INVALID_ARGUMENT naming the position and what was expected", () => {
    const err = refusal("$.items[?@.status == ]");
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toBe(
      "invalid JSONPath query at position 21: expected a literal, a query ('$' or '@'), a function, '!' or '(', found ']'",
    );
    expect(refusal("$.a[1,").rawMessage).toContain("at position 6: expected a selector");
    expect(refusal("$[01]").rawMessage).toContain("at position 2: expected no leading zeros");
    expect(refusal(" $").rawMessage).toContain("at position 0: expected '$'");
  });

  it("checks function well-typedness", () => {
    expect(refusal("$[?length(@.a)]").rawMessage).toContain("length() returns a value");
    expect(refusal("$[?count(1) == 1]").rawMessage).toContain("takes a nodelist");
    expect(refusal("$[?@.* == 1]").rawMessage).toContain("a singular query");
    expect(refusal("$[?foo(@)]").rawMessage).toContain("expected a function (length");
  });

  it("counts positions in code points", () => {
    expect(refusal("$['😀'] x").rawMessage).toContain("at position 6:");
  });
});
