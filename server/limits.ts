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
  /** How long an Offload stream may go without a message before it is cancelled. */
  readonly idleStreamMs: number;
  /** Most payload bytes one run may hold (see server/run-bytes.ts); unset: no limit. */
  readonly maxRunBytes?: number;
}

/** defaultLimits are the limits of a server started without overrides. */
export const defaultLimits: ServerLimits = {
  maxBlobBytes: 8 * 1024 * 1024 * 1024,
  maxChunkBytes: 4 * 1024 * 1024,
  inlineBytes: 16 * 1024,
  indexStride: 1024,
  idleStreamMs: 60_000,
};

/**
 * lowestLimit combines the server's limit with a tenant's own: the lower of the two, or
 * whichever is set; undefined (no limit) only when neither is.
 */
export function lowestLimit(
  server: number | undefined,
  tenant: number | undefined,
): number | undefined {
  if (server === undefined) return tenant;
  if (tenant === undefined) return server;
  return Math.min(server, tenant);
}
