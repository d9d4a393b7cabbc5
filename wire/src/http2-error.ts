import { constants } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

/** The gRPC code each HTTP/2 reset stands for (gRPC's PROTOCOL-HTTP2.md, "Errors"), by name. */
const resetVerdicts: Readonly<Record<string, Code>> = {
  PROTOCOL_ERROR: Code.Internal,
  INTERNAL_ERROR: Code.Internal,
  FLOW_CONTROL_ERROR: Code.Internal,
  SETTINGS_TIMEOUT: Code.Internal,
  FRAME_SIZE_ERROR: Code.Internal,
  COMPRESSION_ERROR: Code.Internal,
  CONNECT_ERROR: Code.Internal,
  REFUSED_STREAM: Code.Unavailable,
  CANCEL: Code.Canceled,
  ENHANCE_YOUR_CALM: Code.ResourceExhausted,
  INADEQUATE_SECURITY: Code.PermissionDenied,
  HTTP_1_1_REQUIRED: Code.PermissionDenied,
};

/** The same, by reset code number: 2 -> ["INTERNAL_ERROR", INTERNAL]. */
const resets: ReadonlyMap<number, readonly [string, Code]> = new Map(
  Object.entries(resetVerdicts).map(([name, code]) => [
    constants[`NGHTTP2_${name}` as keyof typeof constants] as number,
    [name, code] as const,
  ]),
);

/**
 * Whether a stream's connection was still open when the stream closed ("open"), or had already
 * gone: closed, reset or destroyed under it ("lost").
 */
type StreamConnection = "open" | "lost";

/**
 * fromResetCode returns the error a stream closed with `rstCode` ends its call with, or
 * undefined for NO_ERROR and STREAM_CLOSED (which carry no verdict on the call). It is for
 * closes this side did not ask for: a call its own caller cancelled (an aborted AbortSignal)
 * has already ended CANCELED, whatever code its stream then closes with.
 *
 * Each code means what gRPC's HTTP/2 mapping (PROTOCOL-HTTP2.md, "Errors") says when the peer
 * sent it, on a connection that is still open: a peer's RST_STREAM CANCEL is CANCELED, the
 * peer's decision to end the call (Spillway's server resets a stream this way when its client
 * stalls past a deadline), and repeating the call would meet the same end. `connection` "lost"
 * changes one verdict: Node's http2 closes every stream of a connection whose socket closed with
 * CANCEL of its own making (socketOnClose in lib/internal/http2/core.js), which no peer sent;
 * the server was lost (killed, crashed, unreachable) with the call unanswered, so that CANCEL is
 * UNAVAILABLE, as grpc-js reports it ("Connection dropped"), and an idempotent call may be
 * repeated on another connection. A client tells the two apart by whether the stream's session
 * was already destroyed when the stream emitted "close": Node destroys it in the same turn as it
 * closes the streams of a closed socket, while a RST_STREAM read from a live connection closes
 * its stream with the session still open.
 */
export function fromResetCode(
  rstCode: number,
  connection: StreamConnection = "open",
): ConnectError | undefined {
  const reset = resets.get(rstCode);
  if (reset === undefined) return undefined;
  const [name, code] = reset;
  if (connection === "lost" && code === Code.Canceled) {
    return new ConnectError(
      `the http/2 connection closed before the call ended (stream closed with error code ${name} (0x${rstCode.toString(16)}))`,
      Code.Unavailable,
    );
  }
  return new ConnectError(
    `http/2 stream closed with error code ${name} (0x${rstCode.toString(16)})`,
    code,
  );
}

/** The Node.js error codes in an error and its chain of causes. */
function nodeCodes(reason: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  for (let at = reason; at instanceof Error && !seen.has(at); at = at.cause) {
    seen.add(at);
    const code = (at as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
  }
  return codes;
}

/**
 * fromHttp2Error is the one place the gRPC transport turns what Node's http2 and net modules
 * throw into a ConnectError: a server that cannot be reached (refused, unresolvable, timed out)
 * or a connection the server's side broke under the call (ECONNRESET, EPIPE: the server was
 * killed or crashed, so an idempotent call may be repeated elsewhere; grpc-js, too, makes
 * ECONNRESET UNAVAILABLE) is UNAVAILABLE; a stream used after it was torn down on this side is
 * ABORTED; anything else is INTERNAL. A ConnectError passes through unchanged; the original error is kept as the cause.
 */
export function fromHttp2Error(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const codes = nodeCodes(reason);
  const has = (...wanted: string[]) => codes.some((c) => wanted.includes(c));
  const code = has("ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNRESET", "EPIPE")
    ? Code.Unavailable
    : has("ERR_STREAM_WRITE_AFTER_END", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM")
      ? Code.Aborted
      : Code.Internal;
  const err = ConnectError.from(reason, code);
  if (err !== reason) err.cause = reason;
  return err;
}
