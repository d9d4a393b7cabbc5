import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { startSpillwayServer } from "../server/src/server.js";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

describe("authentication and tenancy", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ tokens: { "token-a": "tenant-a", "token-b": "tenant-b" } });
  });
  afterAll(() => t.stop());

  it("maps a bearer token to its tenant and accepts keys of that tenant", async () => {
    const a = await t
      .sdk("token-a")
      .offload({ tenant: "tenant-a", runId: "run", callId: "c1" }, "hello\n");
    expect(a.key?.tenant).toBe("tenant-a");
    expect(a.handle).toBe("res_c1");
  });

  it("refuses a key naming another tenant with PERMISSION_DENIED", async () => {
    const err = await t
      .sdk("token-a")
      .offload({ tenant: "tenant-b", runId: "run", callId: "c1" }, "x")
      .catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
    // Both names, so the caller sees which tenant its token is for.
    expect((err as ConnectError).rawMessage).toBe(
      'header.key.tenant: "tenant-b" is not the caller\'s tenant "tenant-a" (the tenant comes from the bearer token)',
    );
  });

  it("keeps tenants apart: the same run and handle in another tenant is not visible", async () => {
    await t
      .sdk("token-a")
      .offload({ tenant: "tenant-a", runId: "shared", callId: "c" }, "secret-a\n");
    const code = await codeOf(
      t.sdk("token-b").readToolOutput({ runId: "shared", handle: "res_c" }),
    );
    expect(code).toBe(Code.PermissionDenied);
  });

  it("answers UNAUTHENTICATED without a token or with an unknown one", async () => {
    expect(await codeOf(t.raw().getServerInfo({}))).toBe(Code.Unauthenticated);
    expect(await codeOf(t.raw("nope").getServerInfo({}))).toBe(Code.Unauthenticated);
  });

  it("serves health checks without a token", async () => {
    const { createClient } = await import("@connectrpc/connect");
    const { createGrpcTransport } = await import("@connectrpc/connect-node");
    const { Health } = await import("@spillway/proto/grpc/health/v1/health_pb.js");
    const health = createClient(Health, createGrpcTransport({ baseUrl: t.url }));
    const res = await health.check({ service: "spillway.v1.SpillwayService" });
    expect(res.status).toBe(1);
  });
});

describe("dev mode", () => {
  it("refuses to listen beyond loopback without a token file", async () => {
    await expect(
      startSpillwayServer({ backend: createMemoryBackend(), host: "0.0.0.0", port: 0 }),
    ).rejects.toThrow(/loopback/);
  });

  it("serves one dev tenant on loopback without a token", async () => {
    const t = await startTestServer({ backend: "memory" });
    try {
      const a = await t.sdk().offload({ tenant: "dev", runId: "r", callId: "c" }, "x");
      expect(a.sizeBytes).toBe(1n);
      expect(await codeOf(t.sdk().offload({ tenant: "other", runId: "r", callId: "c" }, "x"))).toBe(
        Code.PermissionDenied,
      );
    } finally {
      await t.stop();
    }
  });
});

describe("per-tenant limits from the token file", () => {
  it("refuses a payload over the tenant's own max_blob_bytes, others keep the server's", async () => {
    const { mkdtemp, rm, writeFile } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const { hashToken } = await import("../server/src/auth.js");
    const { createSpillwayClient } = await import("@spillway/client");
    const dir = await mkdtemp(join(tmpdir(), "spillway-limits-"));
    const tokenFile = join(dir, "tokens");
    await writeFile(
      tokenFile,
      `${hashToken("small")} small max_blob_bytes=100000\n${hashToken("big")} big\n`,
    );
    const server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      tokenFile,
    });
    try {
      const small = createSpillwayClient({ baseUrl: server.url, token: "small" });
      const big = createSpillwayClient({ baseUrl: server.url, token: "big" });
      const payload = "x".repeat(150_000);
      const err = await small
        .offload({ tenant: "small", runId: "r", callId: "c" }, payload)
        .catch((e: unknown) => ConnectError.from(e));
      expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
      expect((err as ConnectError).rawMessage).toContain("max_blob_bytes 100000");
      await small.offload({ tenant: "small", runId: "r", callId: "ok" }, "x".repeat(90_000));
      const ok = await big.offload({ tenant: "big", runId: "r", callId: "c" }, payload);
      expect(ok.sizeBytes).toBe(150_000n);
    } finally {
      await server.close(1000);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
