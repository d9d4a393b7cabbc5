import { type Code, ConnectError } from "@connectrpc/connect";
import { statusName } from "@spillway/wire";

/**
 * grpcStatusLine is the line every MCP tool error of this server ends with: `grpc-status: <n>
 * (<NAME>)`, so a host or a model can tell a refused argument (3) from a missing output (5)
 * or a service that is down (14) without parsing the message.
 */
export function grpcStatusLine(code: Code): string {
  return `grpc-status: ${code} (${statusName(code)})`;
}

/**
 * describeConnectError is `<message>` and the status line for a refusal of the Spillway
 * service; anything that is not a ConnectError reads as an internal error.
 */
export function describeConnectError(err: unknown): string {
  const e = ConnectError.from(err);
  return `error: ${e.rawMessage}\n${grpcStatusLine(e.code)}`;
}
