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

/** TenantLimits are a tenant's own limits from the token file; each one only lowers the server's. */
export interface TenantLimits {
  readonly maxBlobBytes?: number;
  readonly maxRunBytes?: number;
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
