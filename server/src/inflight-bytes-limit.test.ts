import {
  Code,
  ConnectError,
  createContextValues,
  type StreamRequest,
  type StreamResponse,
} from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { tenantKey, tenantLimitsKey } from "./auth.js";
import { createInflightBytesLimit } from "./inflight-bytes-limit.js";
import type { TenantLimits } from "./limits.js";

const weights = { offload: 2000, read: 500 };

/** An Offload call of tenant, with its token-file limits. */
function offloadOf(tenant: string, limits: TenantLimits = {}): StreamRequest {
  return {
    method: { name: "Offload" },
    contextValues: createContextValues().set(tenantKey, tenant).set(tenantLimitsKey, limits),
  } as unknown as StreamRequest;
}

// A streamed response nobody reads holds its reservation until the test ends.
const held = async (): Promise<StreamResponse> =>
  ({
    stream: true,
    message: (async function* () {
      await new Promise(() => {});
    })(),
  }) as unknown as StreamResponse;

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  return call.then(
    () => {
      throw new Error("the call was admitted");
    },
    (e: unknown) => ConnectError.from(e),
  );
}

describe("createInflightBytesLimit", () => {
  it("refuses a limit that no single call fits under, naming it", () => {
    for (const [limits, message] of [
      [
        { maxBytes: 1000, maxBytesPerTenant: 0 },
        "max_inflight_bytes 1000 is below the 2000 bytes one call reserves; use 0 to turn it off",
      ],
      [
        { maxBytes: 0, maxBytesPerTenant: 1500 },
        "max_inflight_bytes_per_tenant 1500 is below the 2000 bytes one call reserves; use 0 to turn it off",
      ],
    ] as const) {
      let err: unknown;
      try {
        createInflightBytesLimit(limits, weights);
      } catch (e) {
        err = e;
      }
      expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
      expect(ConnectError.from(err).rawMessage).toBe(message);
    }
  });

  it("turns the limit off at 0: however many calls are held, none is refused", async () => {
    const off = createInflightBytesLimit({ maxBytes: 0, maxBytesPerTenant: 0 }, weights)(held);
    for (let i = 0; i < 1000; i++) await off(offloadOf("a"));
    // The same load against a limit of two offloads: the third is refused.
    const on = createInflightBytesLimit({ maxBytes: 4000, maxBytesPerTenant: 0 }, weights)(held);
    await on(offloadOf("a"));
    await on(offloadOf("a"));
    expect((await refusal(on(offloadOf("a")))).code).toBe(Code.ResourceExhausted);
  });

  it("keeps a tenant to its share, leaving the rest to the others, lowered by its own limit", async () => {
    const limit = createInflightBytesLimit(
      { maxBytes: 10_000, maxBytesPerTenant: 4000 },
      weights,
    )(held);
    await limit(offloadOf("a"));
    await limit(offloadOf("a"));
    const refused = await refusal(limit(offloadOf("a")));
    expect(refused.code).toBe(Code.ResourceExhausted);
    expect(refused.rawMessage).toBe(
      'tenant "a" holds 4000 of its max_inflight_bytes_per_tenant 4000 in calls in flight on this server; an Offload needs 2000 more; retry shortly',
    );
    // b's own limit lowers its share to one offload.
    await limit(offloadOf("b", { maxInflightBytes: 2000 }));
    expect((await refusal(limit(offloadOf("b", { maxInflightBytes: 2000 })))).code).toBe(
      Code.ResourceExhausted,
    );
    // c has its share; the server's whole is what stops it.
    await limit(offloadOf("c"));
    await limit(offloadOf("c"));
    expect((await refusal(limit(offloadOf("d")))).rawMessage).toBe(
      "10000 of max_inflight_bytes 10000 are held by calls in flight on this server; an Offload needs 2000 more; retry shortly or on another replica",
    );
  });
});
