import { describe, expect, it } from "vitest";
import { parseResourceUri, resourceUri } from "./attachment-json.js";

describe("resource URIs", () => {
  it.each([
    ["run-1", "res_call-1"],
    ["run/with/slashes", "out_call_stdout"],
    ["ünïcode run", "out_c_file:%2Fetc%25x%5Fy"],
    ["a%2Fb", "res_%25"],
    ["run-1", "res@2_call-1"],
    ["run-1", "out@1000_call_1_file:a%5Fb"],
  ])("round-trip run %j and handle %j", (runId, handle) => {
    const uri = resourceUri(runId, handle);
    expect(uri).toMatch(/^spillway:\/\/[^/]+\/[^/]+$/);
    expect(parseResourceUri(uri)).toEqual({ runId, handle });
  });

  it.each([
    "spillway://run",
    "spillway://run/a/b",
    "file:///etc/passwd",
    "spillway:///res_x",
    "spillway://run/%E0%A4%A",
  ])("refuses %j", (uri) => {
    expect(parseResourceUri(uri)).toBeUndefined();
  });
});
