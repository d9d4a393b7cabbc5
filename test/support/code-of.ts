import { type Code, ConnectError } from "@connectrpc/connect";

/** codeOf awaits a call and returns the gRPC code it failed with, or undefined on success. */
export async function codeOf(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
    return undefined;
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

/** failureOf awaits a call that must fail and returns its error as a ConnectError. */
export async function failureOf(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call succeeded");
}

/** codeThrownBy runs fn and returns the gRPC code of the ConnectError it threw, if it threw one. */
export function codeThrownBy(fn: () => unknown): Code | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof ConnectError ? err.code : undefined;
  }
}
