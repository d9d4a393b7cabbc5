/** Options of `Uint8Array.prototype.toBase64` (ECMAScript's Uint8Array base64 methods). */
interface ToBase64Options {
  readonly alphabet?: "base64" | "base64url";
  readonly omitPadding?: boolean;
}

/**
 * uint8ArrayToBase64 is `Uint8Array.prototype.toBase64` as ECMAScript specifies it, encoded by
 * Node's native encoder: the `base64` (default) or `base64url` alphabet, `=` padding unless
 * `omitPadding`. An alphabet other than those two, or a receiver that is not a Uint8Array, is a
 * TypeError, as the standard method throws.
 */
export function uint8ArrayToBase64(this: unknown, options?: ToBase64Options): string {
  if (!(this instanceof Uint8Array)) {
    throw new TypeError(
      "Uint8Array.prototype.toBase64 called on an object that is not a Uint8Array",
    );
  }
  const alphabet = options?.alphabet ?? "base64";
  if (alphabet !== "base64" && alphabet !== "base64url") {
    throw new TypeError(
      `toBase64: alphabet must be "base64" or "base64url", got ${String(alphabet)}`,
    );
  }
  const unpadded = Buffer.from(this.buffer, this.byteOffset, this.byteLength)
    .toString(alphabet)
    .replace(/=+$/, "");
  return options?.omitPadding === true
    ? unpadded
    : unpadded + "=".repeat((4 - (unpadded.length % 4)) % 4);
}

/**
 * installUint8ArrayToBase64 gives `Uint8Array.prototype` the standard `toBase64` method where
 * the runtime lacks it (Node.js 20), and leaves a native one alone. @bufbuild/protobuf encodes
 * every `bytes` field of a JSON message (Connect and gRPC-Web JSON, a `buf curl` or grpcurl
 * read) with the native method when one exists at the time it loads, else with a
 * character-by-character loop that took 150-400 ms per MiB on the server's event loop: one
 * client reading an output as JSON stalled every other call for that long per data frame.
 * It must therefore run before @bufbuild/protobuf is first loaded: the executable's entry and
 * the library's index install it first.
 */
export function installUint8ArrayToBase64(): void {
  if (typeof (Uint8Array.prototype as { toBase64?: unknown }).toBase64 === "function") return;
  Object.defineProperty(Uint8Array.prototype, "toBase64", {
    value: uint8ArrayToBase64,
    writable: true,
    configurable: true,
    enumerable: false,
  });
}
