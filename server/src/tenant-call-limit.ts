import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { tenantKey, tenantLimitsKey } from "./auth.js";
import { holdForCall } from "./hold-for-call.js";

/**
 * createTenantCallLimit bounds how many calls one tenant may have in flight on this replica;
 * the call past the limit is refused at once with RESOURCE_EXHAUSTED, so one tenant's burst of
 * slow streams cannot take every stream slot from the others. A tenant's own `max_calls` in the
 * token file only lowers the limit. A call holds its slot until its response ends, including a
 * streamed response read to its end or abandoned (and every call waits on its client at most
 * the idle stream timeout, idle-request.ts). It must run after the auth interceptor; calls
 * without a tenant (health checks) are not counted.
 */
export function createTenantCallLimit(maxCalls: number): Interceptor {
  const inFlight = new Map<string, number>();
  return (next) => async (req) => {
    const tenant = req.contextValues.get(tenantKey);
    if (tenant === undefined) return next(req);
    const held = inFlight.get(tenant) ?? 0;
    const limit = Math.min(maxCalls, req.contextValues.get(tenantLimitsKey).maxCalls ?? maxCalls);
    if (held >= limit) {
      throw new ConnectError(
        `tenant "${tenant}" has ${held} calls in flight on this server; the limit is ${limit}`,
        Code.ResourceExhausted,
      );
    }
    inFlight.set(tenant, held + 1);
    return holdForCall(next, req, () => {
      const left = (inFlight.get(tenant) ?? 1) - 1;
      if (left <= 0) inFlight.delete(tenant);
      else inFlight.set(tenant, left);
    });
  };
}
