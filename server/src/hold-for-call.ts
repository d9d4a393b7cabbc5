import type {
  StreamRequest,
  StreamResponse,
  UnaryRequest,
  UnaryResponse,
} from "@connectrpc/connect";
import { observeIterable } from "./observe-iterable.js";

type AnyRequest = UnaryRequest | StreamRequest;
type AnyResponse = UnaryResponse | StreamResponse;

/**
 * holdForCall runs the rest of a call (`next(req)`) while something is held for it, and calls
 * `release` exactly once when the call is over: when a unary response or a failure comes back,
 * or when a streamed response is read to its end, fails or is abandoned. Interceptors that count
 * what calls hold (slots, reserved bytes) take it before and let this give it back.
 */
export async function holdForCall(
  next: (req: AnyRequest) => Promise<AnyResponse>,
  req: AnyRequest,
  release: () => void,
): Promise<AnyResponse> {
  let released = false;
  const once = () => {
    if (released) return;
    released = true;
    release();
  };
  try {
    const res = await next(req);
    if (!res.stream) {
      once();
      return res;
    }
    return { ...res, message: observeIterable(res.message, { onEnd: once }) };
  } catch (err) {
    once();
    throw err;
  }
}
