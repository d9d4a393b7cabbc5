import { createHash, timingSafeEqual } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import { BlobKeySchema } from "@spillway/proto/spillway/v1/types_pb.js";
import { readConfigFile } from "./config-files.js";
import type { TenantLimits } from "./limits.js";
import { parseSize, parseWholeNumber } from "./size-option.js";
import { validateRequest } from "./validation.js";

/** DEV_TENANT is the single tenant of a server started without a token file (loopback only). */
export const DEV_TENANT = "dev";

/** tenantKey carries the authenticated tenant from the auth interceptor to the handlers. */
export const tenantKey = createContextKey<string | undefined>(undefined, {
  description: "authenticated tenant",
});

/** Authenticator maps a request's bearer token to its tenant. */
export interface Authenticator {
  /** True when tokens are checked; false for the loopback-only dev mode. */
  readonly enforcing: boolean;
  /** Returns what an `authorization` header grants: tenant and limits; UNAUTHENTICATED else. */
  entryFor(authorization: string | null): TokenEntry;
  /** How many tokens are in force (0 in dev mode, where none is checked). */
  count(): number;
  /**
   * Re-reads the token file (for SIGHUP) and returns how many tokens it holds; a broken file
   * throws an Error naming its path and keeps the previous tokens.
   */
  reload(): number;
}

/** The per-tenant limits a token file line may set, by attribute name. */
const LIMIT_ATTRIBUTES = {
  max_blob_bytes: "maxBlobBytes",
  max_run_bytes: "maxRunBytes",
  max_inflight_bytes: "maxInflightBytes",
  max_calls: "maxCalls",
} as const;

const LINE_FORMAT =
  "<sha256 hex> <tenant> [max_blob_bytes=<size>] [max_run_bytes=<size>] [max_inflight_bytes=<size>] [max_calls=<n>]";

/** The limit attributes a token file line may carry, e.g. `max_blob_bytes`. */
export const TOKEN_LIMIT_ATTRIBUTES = Object.keys(
  LIMIT_ATTRIBUTES,
) as readonly (keyof typeof LIMIT_ATTRIBUTES)[];

/**
 * parseTokenLimit reads the value of one limit attribute as the token file holds it: a whole
 * number for `max_calls`, a size for the byte limits (`10GiB`, `500MB`: parseSize). It returns
 * a safe integer of at least 1, or throws an Error saying in words what is wrong (without the
 * attribute's name): the server reads 0 as "no limit", so a tenant's 0 would lift the server's.
 */
export function parseTokenLimit(attribute: keyof typeof LIMIT_ATTRIBUTES, raw: string): number {
  const n = attribute === "max_calls" ? parseWholeNumber(raw) : parseSize(raw);
  if (n === 0) {
    throw new Error(
      "a tenant's limit must be at least 1; it only lowers the server's (leave it out to use the server's)",
    );
  }
  return n;
}

/**
 * parseTokenFile reads the operator's token file: one `<sha256 hex of token> <tenant>
 * [max_blob_bytes=<size>] [max_run_bytes=<size>] [max_inflight_bytes=<size>] [max_calls=<n>]`
 * per line, the limits in any order, each at most once and at least 1, a size in bytes or with
 * a unit as `--max-blob-bytes` takes it (`10GiB`, `500MB`: parseSize); blank lines and lines starting with `#` are ignored. Tokens themselves never appear in
 * the file, so a leaked file does not leak credentials. A tenant's limits apply to every token
 * of that tenant; two lines giving one tenant different limits are refused, and so are one
 * token given to two tenants (whichever came last would win) and a `max_inflight_bytes` below
 * `minInflightBytes` (what the heaviest call reserves).
 */
export function parseTokenFile(
  text: string,
  opts: { readonly minInflightBytes?: number } = {},
): Map<string, TokenEntry> {
  const tokens = new Map<string, TokenEntry>();
  const limitsOf = new Map<string, string>();
  const lineOf = new Map<string, number>();
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const [hash, tenant, ...attributes] = line.split(/\s+/);
    if (hash === undefined || tenant === undefined || !/^[0-9a-fA-F]{64}$/.test(hash)) {
      throw new Error(`token file line ${index + 1}: expected "${LINE_FORMAT}"`);
    }
    const refusal = tenantRefusal(tenant);
    if (refusal !== undefined) {
      throw new Error(
        `token file line ${index + 1}: invalid tenant ${JSON.stringify(tenant)}: ${refusal}`,
      );
    }
    const limits: { -readonly [K in keyof TenantLimits]?: number } = {};
    for (const attribute of attributes) {
      const [name = "", value = ""] = attribute.split("=", 2);
      const field = Object.hasOwn(LIMIT_ATTRIBUTES, name)
        ? LIMIT_ATTRIBUTES[name as keyof typeof LIMIT_ATTRIBUTES]
        : undefined;
      if (field === undefined || limits[field] !== undefined) {
        throw new Error(`token file line ${index + 1}: expected "${LINE_FORMAT}"`);
      }
      let n: number;
      try {
        n = parseTokenLimit(name as keyof typeof LIMIT_ATTRIBUTES, value);
      } catch (err) {
        throw new Error(
          `token file line ${index + 1}: ${name}=${value}: ${(err as Error).message}`,
        );
      }
      const least = opts.minInflightBytes ?? 0;
      if (field === "maxInflightBytes" && n < least) {
        throw new Error(
          `token file line ${index + 1}: ${name}=${n} is below the ${least} bytes one call reserves; the tenant could make no offload or read`,
        );
      }
      limits[field] = n;
    }
    const key = JSON.stringify(
      Object.values(LIMIT_ATTRIBUTES).map((field) => limits[field] ?? null),
    );
    if (limitsOf.has(tenant) && limitsOf.get(tenant) !== key) {
      throw new Error(`token file line ${index + 1}: tenant "${tenant}" has two different limits`);
    }
    limitsOf.set(tenant, key);
    const known = tokens.get(hash.toLowerCase());
    if (known !== undefined && known.tenant !== tenant) {
      throw new Error(
        `token file line ${index + 1}: the token of line ${lineOf.get(hash.toLowerCase())} again (tenant "${tenant}", there "${known.tenant}"); each token names one tenant`,
      );
    }
    lineOf.set(hash.toLowerCase(), index + 1);
    tokens.set(hash.toLowerCase(), { tenant, ...limits });
  });
  return tokens;
}

/**
 * tenantRefusal says why a tenant name breaks BlobKey.tenant's declared rule (not empty, not
 * `.` or `..`, at most 64 bytes, no `/`, `\` or control character), or undefined when it
 * keeps it: a tenant that no request's key could name is refused when the token file is read.
 */
function tenantRefusal(tenant: string): string | undefined {
  try {
    validateRequest(BlobKeySchema, create(BlobKeySchema, { tenant, runId: "r", callId: "c" }));
    return undefined;
  } catch (err) {
    return ConnectError.from(err).rawMessage;
  }
}

/** TokenEntry is what one token grants: its tenant and that tenant's own limits. */
export interface TokenEntry extends TenantLimits {
  readonly tenant: string;
}

/** tenantLimitsKey carries the authenticated tenant's own limits to the handlers. */
export const tenantLimitsKey = createContextKey<Omit<TokenEntry, "tenant">>(
  {},
  { description: "limits of the authenticated tenant" },
);

/** hashToken returns the lowercase hex SHA-256 of a token, as the token file stores it. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/**
 * The UNAUTHENTICATED a request gets whose authorization header is not one `Bearer <token>`:
 * what is wrong with it, never its value (it may hold a credential).
 */
function malformedAuthorization(authorization: string | null): ConnectError {
  const value = authorization?.trim() ?? "";
  let reason: string;
  if (value === "") reason = "missing bearer token";
  else if (value.includes(",")) reason = "several authorization headers (send one)";
  else if (!/^Bearer(\s|$)/i.test(value)) reason = "the authorization scheme is not Bearer";
  else reason = "malformed bearer token (one token of visible characters, nothing after it)";
  return new ConnectError(
    `${reason}: send the header "authorization: Bearer <token>"`,
    Code.Unauthenticated,
  );
}

/**
 * createAuthenticator checks bearer tokens against a token file, or, without one, maps every
 * request to DEV_TENANT. Token comparison is by SHA-256 digest in constant time.
 */
export function createAuthenticator(opts: {
  tokenFile?: string | undefined;
  minInflightBytes?: number;
  /** How errors name the token file's setting; default `--token-file`. */
  name?: string;
}): Authenticator {
  const tokenFile = opts.tokenFile;
  if (tokenFile === undefined) {
    return {
      enforcing: false,
      entryFor: () => ({ tenant: DEV_TENANT }),
      count: () => 0,
      reload: () => 0,
    };
  }
  const name = opts.name ?? "--token-file";
  // Errors read `--token-file: <path>: <reason>`, whether the file cannot be read or a line is bad.
  const load = (): Map<string, TokenEntry> => {
    const text = readConfigFile(tokenFile, name).toString("utf8");
    try {
      return parseTokenFile(text, opts);
    } catch (err) {
      throw new Error(`${name}: ${tokenFile}: ${(err as Error).message}`);
    }
  };
  let tokens = load();
  const entryFor = (authorization: string | null): TokenEntry => {
    const match = authorization === null ? null : /^Bearer\s+(\S+)$/i.exec(authorization);
    if (match?.[1] === undefined) throw malformedAuthorization(authorization);
    const digest = Buffer.from(hashToken(match[1]), "hex");
    for (const [hash, entry] of tokens) {
      if (timingSafeEqual(Buffer.from(hash, "hex"), digest)) return entry;
    }
    throw new ConnectError("unknown bearer token", Code.Unauthenticated);
  };
  return {
    enforcing: true,
    entryFor,
    count: () => tokens.size,
    reload() {
      tokens = load();
      return tokens.size;
    },
  };
}

/**
 * createAuthInterceptor resolves the caller's tenant before any handler runs and stores it
 * under tenantKey. Health checks are served without a token so probes need no credentials.
 */
export function createAuthInterceptor(auth: Authenticator): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== "grpc.health.v1.Health") {
      const { tenant, ...limits } = auth.entryFor(req.header.get("authorization"));
      req.contextValues.set(tenantKey, tenant);
      req.contextValues.set(tenantLimitsKey, limits);
    }
    return next(req);
  };
}

/** tenantOf returns the authenticated tenant of a handler call. */
export function tenantOf(ctx: HandlerContext): string {
  const tenant = ctx.values.get(tenantKey);
  if (tenant === undefined) {
    throw new ConnectError("request was not authenticated", Code.Unauthenticated);
  }
  return tenant;
}
