import { Code } from "@connectrpc/connect";

/**
 * codeLabel names a status code the way gRPC tooling does: `OK`, `PERMISSION_DENIED`, ….
 */
export function codeLabel(code: Code | undefined): string {
  if (code === undefined) return "OK";
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}
