import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { holdForCall } from "./hold-for-call.js";

/** InflightBytesWeights are the bytes each kind of call reserves while it is in flight. */
export interface InflightBytesWeights {
  /**
   * What one Offload stream can hold in the service at once: a chunk and the inline head. An
   * OffloadBatch reserves the same: its one message is bounded like a chunk.
   */
  readonly offload: number;
  /** What one ReadToolOutput can hold in the service at once: its largest frame. */
  readonly read: number;
}

/**
 * createInflightBytesLimit bounds the bytes this replica holds for Offload and ReadToolOutput
 * calls in flight. Each such call reserves its weight when it arrives and keeps it until its
 * response ends (read to the end, failed or abandoned); a call whose weight does not fit under
 * maxBytes is refused at once with RESOURCE_EXHAUSTED, before it reads or buffers anything, so
 * a call that was admitted is never cut off for memory. Other calls hold no payload and are not
 * counted. maxBytes 0 turns the limit off; otherwise it must fit the heaviest call.
 */
export function createInflightBytesLimit(
  maxBytes: number,
  weights: InflightBytesWeights,
): Interceptor {
  if (maxBytes === 0) return (next) => next;
  const heaviest = Math.max(weights.offload, weights.read);
  if (maxBytes < heaviest) {
    throw new ConnectError(
      `max_inflight_bytes ${maxBytes} is below the ${heaviest} bytes one call reserves; use 0 to turn it off`,
      Code.InvalidArgument,
    );
  }
  let held = 0;
  return (next) => async (req) => {
    const name = req.method.name;
    const weight =
      name === "Offload" || name === "OffloadBatch"
        ? weights.offload
        : name === "ReadToolOutput"
          ? weights.read
          : 0;
    if (weight === 0) return next(req);
    if (held + weight > maxBytes) {
      throw new ConnectError(
        `${held} of max_inflight_bytes ${maxBytes} are held by calls in flight on this server; a ${name} needs ${weight} more; retry shortly or on another replica`,
        Code.ResourceExhausted,
      );
    }
    held += weight;
    return holdForCall(next, req, () => {
      held -= weight;
    });
  };
}
