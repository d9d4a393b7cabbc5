import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createInflightBytesLimit } from "./inflight-bytes-limit.js";

describe("createInflightBytesLimit", () => {
  it("refuses a limit that no single call fits under, naming it", () => {
    let err: unknown;
    try {
      createInflightBytesLimit(1000, { offload: 2000, read: 500 });
    } catch (e) {
      err = e;
    }
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(ConnectError.from(err).rawMessage).toBe(
      "max_inflight_bytes 1000 is below the 2000 bytes one call reserves; use 0 to turn it off",
    );
  });

  it("accepts 0 as no limit", () => {
    expect(typeof createInflightBytesLimit(0, { offload: 2000, read: 500 })).toBe("function");
  });
});
