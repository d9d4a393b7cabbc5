import { constants } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

/** The gRPC code each HTTP/2 reset code stands for (gRPC's PROTOCOL-HTTP2.md, "Errors"). */
const resetCodes: ReadonlyMap<number, Code> = new Map([
  [constants.NGHTTP2_PROTOCOL_ERROR, Code.Internal],
  [constants.NGHTTP2_INTERNAL_ERROR, Code.Internal],
  [constants.NGHTTP2_FLOW_CONTROL_ERROR, Code.Internal],
  [constants.NGHTTP2_SETTINGS_TIMEOUT, Code.Internal],
  [constants.NGHTTP2_FRAME_SIZE_ERROR, Code.Internal],
  [constants.NGHTTP2_COMPRESSION_ERROR, Code.Internal],
  [constants.NGHTTP2_CONNECT_ERROR, Code.Internal],
  [constants.NGHTTP2_REFUSED_STREAM, Code.Unavailable],
  [constants.NGHTTP2_CANCEL, Code.Canceled],
  [constants.NGHTTP2_ENHANCE_YOUR_CALM, Code.ResourceExhausted],
  [constants.NGHTTP2_INADEQUATE_SECURITY, Code.PermissionDenied],
  [constants.NGHTTP2_HTTP_1_1_REQUIRED, Code.PermissionDenied],
]);

/** The names of the reset codes, for messages: 2 -> "INTERNAL_ERROR". */
const resetNames: ReadonlyMap<number, string> = new Map(
  Object.entries(constants)
    .filter(([name]) => /^NGHTTP2_[A-Z_0-9]+$/.test(name) && !name.startsWith("NGHTTP2_ERR_"))
    .filter(([name]) => resetCodes.has(constants[name as keyof typeof constants] as number))
    .map(([name, value]) => [value as number, name.slice("NGHTTP2_".length)]),
);

/**
 * fromResetCode returns the error a stream reset by the peer with `rstCode` ends its call
 * with, or undefined for NO_ERROR and STREAM_CLOSED (which carry no verdict on the call).
 */
export function fromResetCode(rstCode: number): ConnectError | undefined {
  const code = resetCodes.get(rstCode);
  if (code === undefined) return undefined;
  const name = resetNames.get(rstCode) ?? "UNKNOWN";
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
