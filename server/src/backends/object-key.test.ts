import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { checkKey, checkListPrefix, checkRootPrefix, reservedSegmentPrefix } from "./object-key.js";

/** The code a check throws, or "ok" when it accepts the value. */
function outcome(check: () => unknown): Code | "ok" {
  try {
    check();
    return "ok";
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return (err as ConnectError).code;
  }
}

function messageOf(check: () => unknown): string {
  try {
    check();
  } catch (err) {
    return (err as ConnectError).rawMessage;
  }
  throw new Error("the check accepted the value");
}

describe("checkKey", () => {
  it.each([
    "a",
    "t/ten%2Eant/r/run/b/call.stdout/up1",
    "a.b",
    ".b",
    "a..b",
    "...",
    "~0123abcd",
    "é/ü",
    ".tmp",
    "x.tmp-y",
  ])("accepts %j and returns it unchanged", (key) => {
    expect(checkKey(key)).toBe(key);
  });

  it.each([
    ["", "must not be empty"],
    ["/a", "must be relative"],
    ["/", "must be relative"],
    ["a//b", "has an empty segment"],
    ["a/", "has an empty segment"],
    ["//a", "must be relative"],
    [".", "has a '.' or '..' segment"],
    ["..", "has a '.' or '..' segment"],
    ["a/./b", "has a '.' or '..' segment"],
    ["a/../../x", "has a '.' or '..' segment"],
    ["a\\..\\b", "has a backslash"],
    ["a/b\0c", "has a NUL byte"],
    [`a/${reservedSegmentPrefix}x`, "has a reserved '.tmp-' segment"],
    [reservedSegmentPrefix, "has a reserved '.tmp-' segment"],
  ])("refuses %j: %s", (key, why) => {
    expect(outcome(() => checkKey(key))).toBe(Code.InvalidArgument);
    expect(messageOf(() => checkKey(key))).toBe(`key ${JSON.stringify(key)} ${why}`);
  });

  it("shows at most 128 characters of a refused key", () => {
    const key = `${"k".repeat(300)}/..`;
    expect(messageOf(() => checkKey(key))).toBe(
      `key ${JSON.stringify(`${"k".repeat(128)}…`)} has a '.' or '..' segment`,
    );
  });
});

describe("checkListPrefix", () => {
  it.each(["", "a", "a/", "r/ru", "t/ten/r/", ".b", "a/.b"])("accepts %j", (prefix) => {
    expect(outcome(() => checkListPrefix(prefix))).toBe("ok");
  });

  it.each([
    "/",
    "/a/",
    "../",
    "..",
    "a/../",
    "a/..",
    "a/.",
    "a//",
    "a\\b/",
    "a\0",
    `a/${reservedSegmentPrefix}`,
  ])("refuses %j", (prefix) => {
    expect(outcome(() => checkListPrefix(prefix))).toBe(Code.InvalidArgument);
  });

  it("names the prefix as given", () => {
    expect(messageOf(() => checkListPrefix("a//"))).toBe('prefix "a//" has an empty segment');
  });
});

describe("checkRootPrefix", () => {
  it.each([
    ["", ""],
    ["spillway", "spillway/"],
    ["spillway/", "spillway/"],
    ["a/b", "a/b/"],
  ])("turns %j into %j", (prefix, expected) => {
    expect(checkRootPrefix(prefix)).toBe(expected);
  });

  it.each(["/", "/spillway", "/spillway/", "spillway//", "a/../b", "a\\b"])(
    "refuses %j",
    (prefix) => {
      expect(outcome(() => checkRootPrefix(prefix))).toBe(Code.InvalidArgument);
    },
  );
});
