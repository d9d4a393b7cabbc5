import { dataFrameBytes } from "./window/bytes.js";
import { defaultLineIndexStride } from "./window/line-index.js";

/** ServerLimits bound every input the service accepts. */
export interface ServerLimits {
  /** Largest payload one Offload may store. */
  readonly maxBlobBytes: number;
  /** Largest chunk message in an Offload stream. */
  readonly maxChunkBytes: number;
  /** Payloads up to this size are kept inside their record instead of a blob. */
  readonly inlineBytes: number;
  /** Lines between two line-index entries. */
  readonly indexStride: number;
  /** View lines between two checkpoints of the JSON view index; unset: 1024. */
  readonly jsonViewStride?: number;
  /**
   * How long a call may wait on its client before it ends with DEADLINE_EXCEEDED: an Offload
   * stream for its next message, any other call for its request, a response for a client that
   * reads nothing (see idle-request.ts and grpc-node-handler.ts).
   */
  readonly idleStreamMs: number;
  /** Most payload bytes one run may hold (see run-bytes.ts); unset: no limit. */
  readonly maxRunBytes?: number;
}

/** defaultLimits are the limits of a server started without overrides. */
export const defaultLimits: ServerLimits = {
  maxBlobBytes: 8 * 1024 * 1024 * 1024,
  maxChunkBytes: 4 * 1024 * 1024,
  inlineBytes: 16 * 1024,
  indexStride: defaultLineIndexStride,
  idleStreamMs: 60_000,
};

/**
 * callWeights are the bytes one call of each kind reserves under the bytes-in-flight limits
 * (inflight-bytes-limit.ts): an offload its largest chunk and the inline buffer, a read one
 * data frame. A limit below the heavier of the two would refuse that kind of call always.
 */
export function callWeights(limits: Pick<ServerLimits, "maxChunkBytes" | "inlineBytes">): {
  readonly offload: number;
  readonly read: number;
} {
  return { offload: limits.maxChunkBytes + limits.inlineBytes, read: dataFrameBytes };
}

/** TenantLimits are a tenant's own limits from the token file; each one only lowers the server's. */
export interface TenantLimits {
  /** Largest payload the tenant may offload; unset: the server-wide limit. */
  readonly maxBlobBytes?: number;
  /** Most payload bytes one of the tenant's runs may hold; unset: the server-wide limit. */
  readonly maxRunBytes?: number;
  /** Bytes the tenant's calls in flight may hold; unset: max_inflight_bytes_per_tenant. */
  readonly maxInflightBytes?: number;
  /** Calls the tenant may have in flight; unset: max_calls_per_tenant. */
  readonly maxCalls?: number;
}

/**
 * limitsForTenant returns the limits that apply to one tenant: the server's, with the blob and
 * run limits lowered to the tenant's own where those are lower. Offload enforces, and
 * GetServerInfo reports, exactly these.
 */
export function limitsForTenant(server: ServerLimits, tenant: TenantLimits): ServerLimits {
  const maxRunBytes =
    server.maxRunBytes === undefined || tenant.maxRunBytes === undefined
      ? (server.maxRunBytes ?? tenant.maxRunBytes)
      : Math.min(server.maxRunBytes, tenant.maxRunBytes);
  return {
    ...server,
    maxBlobBytes: Math.min(server.maxBlobBytes, tenant.maxBlobBytes ?? Infinity),
    ...(maxRunBytes === undefined ? {} : { maxRunBytes }),
  };
}

/**
 * lowerLimit returns a server-wide limit where 0 means "none" as it applies to a tenant whose
 * own limit (unset: none of its own) may only lower it.
 */
export function lowerLimit(server: number, own: number | undefined): number {
  if (own === undefined) return server;
  return server === 0 ? own : Math.min(server, own);
}
