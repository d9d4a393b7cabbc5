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
 * fromResetCode returns the error a stream reset by the peer with `rstCode` ends its call
 * with, or undefined for NO_ERROR and STREAM_CLOSED (which carry no verdict on the call).
 */
export function fromResetCode(rstCode: number): ConnectError | undefined {
  const reset = resets.get(rstCode);
  if (reset === undefined) return undefined;
  const [name, code] = reset;
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
 * is UNAVAILABLE; a stream or connection torn down under the call is ABORTED; anything else is
 * INTERNAL. A ConnectError passes through unchanged; the original error is kept as the cause.
 */
export function fromHttp2Error(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const codes = nodeCodes(reason);
  const has = (...wanted: string[]) => codes.some((c) => wanted.includes(c));
  const code = has("ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT")
    ? Code.Unavailable
    : has(
          "ERR_STREAM_WRITE_AFTER_END",
          "ERR_STREAM_DESTROYED",
          "ERR_HTTP2_INVALID_STREAM",
          "ECONNRESET",
        )
      ? Code.Aborted
      : Code.Internal;
  const err = ConnectError.from(reason, code);
  if (err !== reason) err.cause = reason;
  return err;
}
