import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { tenantKey, tenantLimitsKey } from "./auth.js";
import { holdForCall } from "./hold-for-call.js";
import { lowerLimit } from "./limits.js";

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

/** InflightBytesLimits are the bytes calls in flight may hold; 0 turns a limit off. */
export interface InflightBytesLimits {
  /** Bytes all calls in flight on this server may hold together (max_inflight_bytes). */
  readonly maxBytes: number;
  /**
   * Bytes the calls in flight of one tenant may hold together (max_inflight_bytes_per_tenant);
   * a tenant's own `max_inflight_bytes` in the token file only lowers it.
   */
  readonly maxBytesPerTenant: number;
}

/**
 * createInflightBytesLimit bounds the bytes this replica holds for Offload and ReadToolOutput
 * calls in flight, in all and per tenant. Each such call reserves its weight when it arrives
 * and keeps it until its response ends (read to the end, failed or abandoned); a call whose
 * weight does not fit under its tenant's share, or under the server's whole, is refused at once
 * with RESOURCE_EXHAUSTED naming the limit, before it reads or buffers anything, so a call that
 * was admitted is never cut off for memory, and one tenant holding all it may still leaves the
 * rest of the server to the others (docs/design/admission-fairness.md). Other calls hold no
 * payload and are not counted; nor are calls without a tenant. Each limit must fit the heaviest
 * call, or be 0 (off). It must run after the auth interceptor.
 */
export function createInflightBytesLimit(
  limits: InflightBytesLimits,
  weights: InflightBytesWeights,
): Interceptor {
  const heaviest = Math.max(weights.offload, weights.read);
  for (const [name, value] of [
    ["max_inflight_bytes", limits.maxBytes],
    ["max_inflight_bytes_per_tenant", limits.maxBytesPerTenant],
  ] as const) {
    if (value !== 0 && value < heaviest) {
      throw new ConnectError(
        `${name} ${value} is below the ${heaviest} bytes one call reserves; use 0 to turn it off`,
        Code.InvalidArgument,
      );
    }
  }
  if (limits.maxBytes === 0 && limits.maxBytesPerTenant === 0) return (next) => next;
  let held = 0;
  const heldBy = new Map<string, number>();
  return (next) => async (req) => {
    const name = req.method.name;
    const weight =
      name === "Offload" || name === "OffloadBatch"
        ? weights.offload
        : name === "ReadToolOutput"
          ? weights.read
          : 0;
    const tenant = req.contextValues.get(tenantKey);
    if (weight === 0 || tenant === undefined) return next(req);
    const article = name === "Offload" || name === "OffloadBatch" ? "an" : "a";
    const share = lowerLimit(
      limits.maxBytesPerTenant,
      req.contextValues.get(tenantLimitsKey).maxInflightBytes,
    );
    const tenantHeld = heldBy.get(tenant) ?? 0;
    // A share as large as the whole (dev mode's one tenant) leaves the server's limit to speak.
    const binding = share !== 0 && (limits.maxBytes === 0 || share < limits.maxBytes);
    if (binding && tenantHeld + weight > share) {
      throw new ConnectError(
        `tenant "${tenant}" holds ${tenantHeld} of its max_inflight_bytes_per_tenant ${share} in calls in flight on this server; ${article} ${name} needs ${weight} more; retry shortly`,
        Code.ResourceExhausted,
      );
    }
    if (limits.maxBytes !== 0 && held + weight > limits.maxBytes) {
      throw new ConnectError(
        `${held} of max_inflight_bytes ${limits.maxBytes} are held by calls in flight on this server; ${article} ${name} needs ${weight} more; retry shortly or on another replica`,
        Code.ResourceExhausted,
      );
    }
    held += weight;
    heldBy.set(tenant, tenantHeld + weight);
    return holdForCall(next, req, () => {
      held -= weight;
      const left = (heldBy.get(tenant) ?? weight) - weight;
      if (left <= 0) heldBy.delete(tenant);
      else heldBy.set(tenant, left);
    });
  };
}
