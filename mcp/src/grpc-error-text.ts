import { Code, ConnectError } from "@connectrpc/connect";

/**
 * grpcCodeName spells a Connect code as gRPC's canonical status name (`NOT_FOUND`,
 * `INVALID_ARGUMENT`), the name gRPC tooling and the server's logs use.
 */
export function grpcCodeName(code: Code): string {
  return (Code[code] ?? "Unknown").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/**
 * grpcStatusLine is the line every MCP tool error of this server ends with: `grpc-status: <n>
 * (<NAME>)`, so a host or a model can tell a refused argument (3) from a missing output (5)
 * or a service that is down (14) without parsing the message.
 */
export function grpcStatusLine(code: Code): string {
  return `grpc-status: ${code} (${grpcCodeName(code)})`;
}

/**
 * describeConnectError is `<message>` and the status line for a refusal of the Spillway
 * service; anything that is not a ConnectError reads as an internal error.
 */
export function describeConnectError(err: unknown): string {
  const e = ConnectError.from(err);
  return `error: ${e.rawMessage}\n${grpcStatusLine(e.code)}`;
}
