import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { endingOf, faultOf } from "./call-fault.js";

const live = new AbortController().signal;
const aborted = AbortSignal.abort();
const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
const pipe = Object.assign(new Error("write EPIPE"), { code: "EPIPE" });

describe("endingOf", () => {
  it("reads connect-node's endings of a client that went away as the client's cancel", () => {
    const cases = [
      // Streaming a response over HTTP/1.1 into a closed connection.
      new ConnectError("write EPIPE", Code.Internal, undefined, undefined, pipe),
      // Reading an upload whose client reset the connection (connect-node's ECONNRESET).
      new ConnectError("read ECONNRESET", Code.Aborted, undefined, undefined, reset),
    ];
    for (const err of cases) {
      const ending = endingOf(err, live) as ConnectError;
      expect(ending.code, err.rawMessage).toBe(Code.Canceled);
      expect(faultOf(ending)).toBe("client");
      expect(ending.cause).toBe(err);
    }
    // Any INTERNAL or UNKNOWN once the call was aborted (its client's connection closed).
    expect((endingOf(new Error("stream destroyed"), aborted) as ConnectError).code).toBe(
      Code.Canceled,
    );
  });

  it("keeps every other ending as it is", () => {
    const race = new ConnectError("a merge into run r is writing handle h; retry", Code.Aborted);
    const broken = new ConnectError("stored record is corrupt", Code.DataLoss);
    const bug = new ConnectError("unexpected", Code.Internal);
    expect(endingOf(race, live)).toBe(race);
    // The server's own ABORTED stays, even when its caller has gone meanwhile.
    expect(endingOf(race, aborted)).toBe(race);
    expect(endingOf(broken, aborted)).toBe(broken);
    expect(endingOf(bug, live)).toBe(bug);
    expect(endingOf(undefined, aborted)).toBeUndefined();
  });
});
