import { Code, ConnectError } from "@connectrpc/connect";

/**
 * jsonText is the compact JSON text JSON.stringify writes for value, or undefined for a value it
 * writes nothing for: undefined, a function, a symbol, or an object whose toJSON gives one of
 * them (noTextKind names which). A value it cannot write at all (a BigInt, a cycle, a toJSON
 * that throws) is a ConnectError INVALID_ARGUMENT whose message starts with `who`, carrying
 * JSON.stringify's words and its error as the cause; it never throws anything else.
 */
export function jsonText(value: unknown, who: string): string | undefined {
  try {
    // JSON.stringify's declared string return is wrong for exactly the values handled here.
    return JSON.stringify(value) as string | undefined;
  } catch (err) {
    throw new ConnectError(
      `${who}: the JSON value cannot be written as JSON: ${err instanceof Error ? err.message : String(err)}`,
      Code.InvalidArgument,
      undefined,
      undefined,
      err,
    );
  }
}

/** noTextKind names a value jsonText gave no text for, for a message: `undefined`, `a symbol`, … */
export function noTextKind(value: unknown): string {
  if (value === undefined) return "undefined";
  if (typeof value === "function") return "a function";
  if (typeof value === "symbol") return "a symbol";
  return "an object whose toJSON gives no JSON value";
}
