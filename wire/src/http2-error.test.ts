import * as http2 from "node:http2";
import { createServer } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { fromHttp2Error, fromResetCode } from "./http2-error.js";

/** The error Node's http2 gives when connecting to `url`. */
function connectError(url: string): Promise<unknown> {
  return new Promise((resolve) => {
    const session = http2.connect(url);
    session.on("error", (err) => {
      session.destroy();
      resolve(err);
    });
  });
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === "object" && address !== null ? address.port : 0;
}

describe("fromHttp2Error", () => {
  it("makes a refused connection UNAVAILABLE, keeping Node's error as the cause", async () => {
    const err = await connectError(`http://127.0.0.1:${await closedPort()}`);
    const mapped = fromHttp2Error(err);
    expect(mapped.code).toBe(Code.Unavailable);
    expect(mapped.cause).toBe(err);
  });

  it("makes a host that does not resolve UNAVAILABLE", async () => {
    const err = await connectError("http://spillway-test.invalid:1");
    expect(fromHttp2Error(err).code).toBe(Code.Unavailable);
  });

  it("finds the Node code anywhere in the chain of causes", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    expect(fromHttp2Error(new Error("session failed", { cause: refused })).code).toBe(
      Code.Unavailable,
    );
  });

  // The SDK repeats an idempotent call on UNAVAILABLE: a server killed mid-call breaks the
  // connection this way, and another replica can answer.
  it("makes a connection the server's side broke under the call UNAVAILABLE", () => {
    for (const code of ["ECONNRESET", "EPIPE"]) {
      const err = Object.assign(new Error(code), { code });
      expect(fromHttp2Error(err).code).toBe(Code.Unavailable);
    }
  });

  it("makes a stream used after this side tore it down ABORTED", () => {
    for (const code of ["ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM"]) {
      const err = Object.assign(new Error(code), { code });
      expect(fromHttp2Error(err).code).toBe(Code.Aborted);
    }
  });

  it("makes anything else INTERNAL and passes a ConnectError through", () => {
    expect(fromHttp2Error(new Error("odd")).code).toBe(Code.Internal);
    const own = new ConnectError("mine", Code.NotFound);
    expect(fromHttp2Error(own)).toBe(own);
  });
});

describe("fromResetCode", () => {
  it("maps reset codes as gRPC's HTTP/2 mapping says", () => {
    const { constants: c } = http2;
    expect(fromResetCode(c.NGHTTP2_REFUSED_STREAM)?.code).toBe(Code.Unavailable);
    expect(fromResetCode(c.NGHTTP2_CANCEL)?.code).toBe(Code.Canceled);
    expect(fromResetCode(c.NGHTTP2_ENHANCE_YOUR_CALM)?.code).toBe(Code.ResourceExhausted);
    expect(fromResetCode(c.NGHTTP2_INADEQUATE_SECURITY)?.code).toBe(Code.PermissionDenied);
    expect(fromResetCode(c.NGHTTP2_PROTOCOL_ERROR)?.code).toBe(Code.Internal);
  });

  it("makes the CANCEL Node closes a lost connection's streams with UNAVAILABLE, not CANCELED", () => {
    const { constants: c } = http2;
    const lost = fromResetCode(c.NGHTTP2_CANCEL, "lost");
    expect(lost?.code).toBe(Code.Unavailable);
    expect(lost?.rawMessage).toBe(
      "the http/2 connection closed before the call ended (stream closed with error code CANCEL (0x8))",
    );
    // A server's own RST_STREAM CANCEL, on a connection still open, is its verdict on the call.
    expect(fromResetCode(c.NGHTTP2_CANCEL, "open")?.code).toBe(Code.Canceled);
    // Only CANCEL is of Node's making; a code the peer sent keeps its meaning.
    expect(fromResetCode(c.NGHTTP2_INTERNAL_ERROR, "lost")?.code).toBe(Code.Internal);
    expect(fromResetCode(c.NGHTTP2_ENHANCE_YOUR_CALM, "lost")?.code).toBe(Code.ResourceExhausted);
    expect(fromResetCode(c.NGHTTP2_NO_ERROR, "lost")).toBeUndefined();
  });

  it("gives no verdict for NO_ERROR and STREAM_CLOSED", () => {
    expect(fromResetCode(http2.constants.NGHTTP2_NO_ERROR)).toBeUndefined();
    expect(fromResetCode(http2.constants.NGHTTP2_STREAM_CLOSED)).toBeUndefined();
  });

  // The client retries an idempotent call on this message (clients/ts/src/retry.test.ts).
  it("names INTERNAL_ERROR in the message the client's retry policy knows", () => {
    const err = fromResetCode(http2.constants.NGHTTP2_INTERNAL_ERROR);
    expect(err?.code).toBe(Code.Internal);
    expect(err?.rawMessage).toBe("http/2 stream closed with error code INTERNAL_ERROR (0x2)");
  });
});
