import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { HandlerContext, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";

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
  /** Returns the tenant of an `authorization` header value, or throws UNAUTHENTICATED. */
  tenantFor(authorization: string | null): string;
  /** Re-reads the token file (for SIGHUP); a broken file keeps the previous tokens. */
  reload(): void;
}

/**
 * parseTokenFile reads the operator's token file: one `<sha256 hex of token> <tenant>` per
 * line; blank lines and lines starting with `#` are ignored. Tokens themselves never appear
 * in the file, so a leaked file does not leak credentials.
 */
export function parseTokenFile(text: string): Map<string, string> {
  const tokens = new Map<string, string>();
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const match = /^([0-9a-fA-F]{64})\s+(\S+)$/.exec(line);
    if (match === null || match[1] === undefined || match[2] === undefined) {
      throw new Error(`token file line ${index + 1}: expected "<sha256 hex> <tenant>"`);
    }
    const tenant = match[2];
    if (tenant === "." || tenant === ".." || /[/\\\0]/.test(tenant) || tenant.length > 64) {
      throw new Error(`token file line ${index + 1}: invalid tenant "${tenant}"`);
    }
    tokens.set(match[1].toLowerCase(), tenant);
  });
  return tokens;
}

/** hashToken returns the lowercase hex SHA-256 of a token, as the token file stores it. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/**
 * createAuthenticator checks bearer tokens against a token file, or, without one, maps every
 * request to DEV_TENANT. Token comparison is by SHA-256 digest in constant time.
 */
export function createAuthenticator(opts: { tokenFile?: string | undefined }): Authenticator {
  const tokenFile = opts.tokenFile;
  if (tokenFile === undefined) {
    return { enforcing: false, tenantFor: () => DEV_TENANT, reload: () => {} };
  }
  let tokens = parseTokenFile(readFileSync(tokenFile, "utf8"));
  return {
    enforcing: true,
    tenantFor(authorization) {
      const match = authorization === null ? null : /^Bearer\s+(\S+)$/i.exec(authorization);
      if (match?.[1] === undefined) {
        throw new ConnectError("missing bearer token", Code.Unauthenticated);
      }
      const digest = Buffer.from(hashToken(match[1]), "hex");
      for (const [hash, tenant] of tokens) {
        if (timingSafeEqual(Buffer.from(hash, "hex"), digest)) return tenant;
      }
      throw new ConnectError("unknown bearer token", Code.Unauthenticated);
    },
    reload() {
      tokens = parseTokenFile(readFileSync(tokenFile, "utf8"));
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
      req.contextValues.set(tenantKey, auth.tenantFor(req.header.get("authorization")));
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
