import { Code, ConnectError } from "@connectrpc/connect";

/**
 * readSingle reads the one request message of a unary or server-streaming call, as connect's
 * handlers do: none, or a second one, is a protocol error (UNIMPLEMENTED) naming the kind.
 */
export async function readSingle<T>(
  messages: AsyncIterable<T>,
  kind: "unary" | "server-streaming",
): Promise<T> {
  const it = messages[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true) {
    throw new ConnectError(
      `protocol error: missing input message for ${kind} method`,
      Code.Unimplemented,
    );
  }
  const second = await it.next();
  if (second.done !== true) {
    await it.return?.();
    throw new ConnectError(
      `protocol error: received extra input message for ${kind} method`,
      Code.Unimplemented,
    );
  }
  return first.value;
}
