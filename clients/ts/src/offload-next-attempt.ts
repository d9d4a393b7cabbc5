import { Code, ConnectError } from "@connectrpc/connect";
import type { ResultAttachment } from "@spillway/proto/spillway/v1/types_pb.js";
import type {
  OffloadData,
  OffloadKey,
  OffloadOptions,
  SpillwayCallOptions,
  SpillwayClient,
} from "./client.js";

/** The highest attempt a key may carry (BlobKey.attempt). */
export const maxAttempt = 1000;

/**
 * AttemptTracker remembers the latest attempt committed per (tenant, run, call, slot). It only
 * saves round trips: the server's records decide which attempt an output is.
 */
export interface AttemptTracker {
  /** The last attempt committed for the output through this tracker, or 1. */
  latest(id: string): number;
  /** Records that attempt `attempt` of the output is committed; an attempt never goes back. */
  remember(id: string, attempt: number): void;
}

/**
 * createAttemptTracker keeps at most `capacity` outputs (default 10,000), dropping the least
 * recently used first; a forgotten output starts again at its first attempt.
 */
export function createAttemptTracker(capacity = 10_000): AttemptTracker {
  const latest = new Map<string, number>();
  return {
    latest(id) {
      const found = latest.get(id);
      if (found === undefined) return 1;
      // Re-inserted so that Map order is least recently used first.
      latest.delete(id);
      latest.set(id, found);
      return found;
    },
    remember(id, attempt) {
      const value = Math.max(attempt, latest.get(id) ?? 1);
      latest.delete(id);
      latest.set(id, value);
      while (latest.size > capacity) {
        const oldest = latest.keys().next().value;
        if (oldest === undefined) break;
        latest.delete(oldest);
      }
    },
  };
}

/**
 * offloadNextAttempt offloads data for the call key names as its latest or next attempt, for
 * integrations that key outputs by tool call id. An agent framework may run the same call again
 * (a re-executed tool call, a replayed run); the same key with other bytes would be
 * ALREADY_EXISTS, since outputs are never overwritten.
 *
 * It offloads as the latest attempt tracker knows (the first, for a call it has not seen): the
 * same bytes replay that attempt's record; other bytes (ALREADY_EXISTS) go to the next attempt,
 * and so on up to attempt 1000. So a call offloaded once keeps `res_<call_id>`, and each retry
 * whose output differs gets `res@2_<call_id>`, `res@3_<call_id>`, … with every attempt kept. A
 * key that names its attempt, and a byte stream (which cannot be sent twice), are offloaded as
 * that one attempt only. Any other failure is thrown as it came.
 */
export async function offloadNextAttempt(
  client: SpillwayClient,
  key: OffloadKey,
  data: OffloadData,
  tracker: AttemptTracker,
  options: OffloadOptions = {},
  call?: SpillwayCallOptions,
): Promise<ResultAttachment> {
  const id = JSON.stringify([key.tenant, key.runId, key.callId, options.slot ?? null]);
  if (key.attempt !== undefined || (typeof data === "object" && Symbol.asyncIterator in data)) {
    return client.offload(
      key.attempt === undefined ? { ...key, attempt: tracker.latest(id) } : key,
      data,
      options,
      call,
    );
  }
  for (let attempt = tracker.latest(id); ; attempt++) {
    try {
      const attachment = await client.offload({ ...key, attempt }, data, options, call);
      tracker.remember(id, attempt);
      return attachment;
    } catch (err) {
      if (!(err instanceof ConnectError) || err.code !== Code.AlreadyExists) throw err;
      if (attempt >= maxAttempt) throw err;
    }
  }
}
