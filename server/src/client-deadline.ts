import type { IncomingHttpHeaders } from "node:http";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";

/**
 * The longest client deadline the server keeps, 596 hours (2,145,600,000 ms, 24.8 days): the
 * longest a Node.js timer waits (2^31 - 1 ms) rounded down to what `grpc-timeout`'s eight
 * digits say exactly.
 */
export const maxClientDeadlineMs = 596 * 60 * 60 * 1000;

/**
 * capClientDeadline cuts a request's `grpc-timeout` (gRPC, gRPC-Web) or `connect-timeout-ms`
 * (Connect) to maxClientDeadlineMs when it asks for more, in place, before any handler reads
 * it: a longer one set a timer Node fires after 1 ms, so a client that asked for a deadline of
 * years (grpcio's `timeout=1e9`, `grpc-timeout: 99999999H`, all valid) had every call that
 * was not instant fail DEADLINE_EXCEEDED. Malformed values are left for the protocol to refuse.
 */
export function capClientDeadline(headers: IncomingHttpHeaders): void {
  const grpc = headers["grpc-timeout"];
  if (typeof grpc === "string") {
    const { timeoutMs } = parseTimeout(grpc, Number.MAX_SAFE_INTEGER);
    if (timeoutMs !== undefined && timeoutMs > maxClientDeadlineMs)
      headers["grpc-timeout"] = "596H";
  }
  const connect = headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect)) {
    if (Number(connect) > maxClientDeadlineMs) {
      headers["connect-timeout-ms"] = String(maxClientDeadlineMs);
    }
  }
}

/**
 * clientDeadlineMs is the deadline a request's `grpc-timeout` (gRPC-Web) or
 * `connect-timeout-ms` (Connect) asks for, in milliseconds, or undefined when it sends none or
 * a malformed one (which the protocol refuses).
 */
export function clientDeadlineMs(headers: IncomingHttpHeaders): number | undefined {
  const grpc = headers["grpc-timeout"];
  if (typeof grpc === "string") return parseTimeout(grpc, maxClientDeadlineMs).timeoutMs;
  const connect = headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect)) return Number(connect);
  return undefined;
}
