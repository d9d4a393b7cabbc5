import { Code } from "@connectrpc/connect";

/**
 * statusName names a status code the way gRPC tooling does: `OK` for no code, then
 * `PERMISSION_DENIED`, `INVALID_ARGUMENT`, …; a number outside the enum is `UNKNOWN`.
 */
export function statusName(code: Code | undefined): string {
  if (code === undefined) return "OK";
  return (Code[code] ?? "Unknown").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}
