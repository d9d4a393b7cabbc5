import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createMetrics } from "../metrics.js";
import { instrumentBackend } from "./instrumented.js";
import { createMemoryBackend } from "./memory.js";

async function* bytes(...parts: string[]) {
  for (const p of parts) yield new TextEncoder().encode(p);
}

async function errorCounts(metrics: ReturnType<typeof createMetrics>) {
  const { values } = await metrics.backendErrors.get();
  return Object.fromEntries(
    values.map((v) => [`${v.labels.backend}:${v.labels.grpc_code}`, v.value]),
  );
}

describe("instrumentBackend", () => {
  it("passes results through and keeps the base backend's kind", async () => {
    const metrics = createMetrics();
    const backend = instrumentBackend(createMemoryBackend(), metrics);
    expect(backend.kind).toBe("memory");
    expect((await backend.put("t/a", bytes("hello"))).size).toBe(5);
    const chunks: Uint8Array[] = [];
    for await (const c of await backend.get("t/a", { offset: 1 })) chunks.push(c);
    expect(Buffer.concat(chunks).toString()).toBe("ello");
    expect((await backend.list("t/")).keys).toEqual(["t/a"]);
    expect(await errorCounts(metrics)).toEqual({});
  });

  it("does not count the contract's answers for a missing or taken key", async () => {
    const metrics = createMetrics();
    const backend = instrumentBackend(createMemoryBackend(), metrics);
    await backend.put("t/a", bytes("x"));
    await expect(backend.get("t/missing")).rejects.toMatchObject({ code: Code.NotFound });
    await expect(backend.put("t/a", bytes("y"))).rejects.toMatchObject({
      code: Code.AlreadyExists,
    });
    expect(await errorCounts(metrics)).toEqual({});
  });

  it("counts store failures by backend and code, but not a failed upload body", async () => {
    const metrics = createMetrics();
    const backend = instrumentBackend(createMemoryBackend(), metrics);
    await expect(backend.get("t/a", { offset: -1 })).rejects.toMatchObject({
      code: Code.InvalidArgument,
    });
    await expect(backend.list("t/", { limit: 0 })).rejects.toMatchObject({
      code: Code.InvalidArgument,
    });
    expect(await errorCounts(metrics)).toEqual({ "memory:InvalidArgument": 2 });

    async function* failingBody() {
      yield new Uint8Array(1);
      throw new Error("the caller's stream broke");
    }
    await expect(backend.put("t/b", failingBody())).rejects.toThrow();
    expect(await errorCounts(metrics)).toEqual({ "memory:InvalidArgument": 2 });
  });
});
