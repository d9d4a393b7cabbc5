import { Code } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { spawnSpillway } from "./support/spawn-spillway.js";
import { startTestServer } from "./support/test-server.js";

describe("GetServerInfo", () => {
  it("reports the defaults of a server started without limits", async () => {
    const t = await startTestServer({ backend: "memory" });
    try {
      const { limits, tenant } = await t.raw().getServerInfo({});
      expect(tenant).toBe("dev");
      expect(limits?.maxBlobBytes).toBe(8n * 1024n ** 3n);
      expect(limits?.maxChunkBytes).toBe(4n * 1024n ** 2n);
      expect(limits?.inlineBytes).toBe(16n * 1024n);
      expect(limits?.maxRunBytes).toBeUndefined();
      expect(limits?.maxInflightBytes).toBe(1024n ** 3n);
      expect(limits?.maxCallsPerTenant).toBe(256);
      expect(limits?.requestDeadline).toBeUndefined();
      expect(limits?.offloadIdleTimeout?.seconds).toBe(60n);
      // Dev mode's one tenant may use all of the in-flight bytes.
      expect(limits?.maxInflightBytesPerTenant).toBe(1024n ** 3n);
      expect(limits?.connectionIdleTimeout?.seconds).toBe(300n);
      expect(limits?.keepaliveInterval?.seconds).toBe(60n);
      expect(limits?.keepaliveTimeout?.seconds).toBe(20n);
    } finally {
      await t.stop();
    }
  });

  it("reports every limit as it applies to the caller, a tenant's own limits included", async () => {
    const t = await startTestServer({
      backend: "memory",
      // The test server writes `<hash> <tenant>` lines; the tenant field carries the attributes.
      tokens: {
        small:
          "small max_run_bytes=1048576 max_blob_bytes=4096 max_inflight_bytes=8421376 max_calls=3",
        big: "big",
      },
      limits: { maxRunBytes: 10 * 1024 * 1024, idleStreamMs: 2500 },
      maxInflightBytes: 64 * 1024 * 1024,
      maxCallsPerTenant: 7,
      requestDeadlineMs: 1500,
      connectionIdleMs: 0,
      keepaliveMs: 0,
    });
    try {
      expect((await t.raw("small").getServerInfo({})).tenant).toBe("small");
      expect((await t.raw("big").getServerInfo({})).tenant).toBe("big");
      const small = (await t.raw("small").getServerInfo({})).limits;
      const big = (await t.raw("big").getServerInfo({})).limits;
      expect(small?.maxRunBytes).toBe(1048576n);
      expect(small?.maxBlobBytes).toBe(4096n);
      expect(big?.maxRunBytes).toBe(10n * 1024n * 1024n);
      expect(big?.maxBlobBytes).toBe(8n * 1024n ** 3n);
      expect(small?.maxInflightBytesPerTenant).toBe(8421376n);
      expect(small?.maxCallsPerTenant).toBe(3);
      // With a token file a tenant's default share is a quarter of the server's bytes.
      expect(big?.maxInflightBytesPerTenant).toBe(16n * 1024n * 1024n);
      expect(big?.maxCallsPerTenant).toBe(7);
      for (const limits of [small, big]) {
        expect(limits?.maxInflightBytes).toBe(64n * 1024n * 1024n);
        expect(limits?.connectionIdleTimeout).toBeUndefined();
        expect(limits?.keepaliveInterval).toBeUndefined();
        expect(limits?.requestDeadline).toMatchObject({ seconds: 1n, nanos: 500_000_000 });
        expect(limits?.offloadIdleTimeout).toMatchObject({ seconds: 2n, nanos: 500_000_000 });
      }
      // The reported blob limit is the one enforced.
      const over = t
        .sdk("small")
        .offload({ tenant: "small", runId: "r", callId: "c" }, new Uint8Array(4097));
      expect(await codeOf(over)).toBe(Code.ResourceExhausted);
    } finally {
      await t.stop();
    }
  });

  it("reports what the serve flags set: idle stream, connection idle, keepalive, tenant share", async () => {
    const server = await spawnSpillway([
      "--backend",
      "memory",
      "--idle-stream-ms",
      "15000",
      "--connection-idle-ms",
      "90000",
      "--keepalive-ms",
      "30000",
      "--keepalive-timeout-ms",
      "5000",
      "--max-inflight-bytes-per-tenant",
      "67108864",
    ]);
    try {
      const { limits } = await createSpillwayClient({ baseUrl: server.url }).raw.getServerInfo({});
      expect(limits?.offloadIdleTimeout?.seconds).toBe(15n);
      expect(limits?.connectionIdleTimeout?.seconds).toBe(90n);
      expect(limits?.keepaliveInterval?.seconds).toBe(30n);
      expect(limits?.keepaliveTimeout?.seconds).toBe(5n);
      expect(limits?.maxInflightBytesPerTenant).toBe(64n * 1024n * 1024n);
    } finally {
      await server.stop();
    }
  });
});
