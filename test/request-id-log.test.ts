import { writeFile } from "node:fs/promises";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256 } from "./support/read-back.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const WARN = 40;

/** An interceptor sending `id` as every call's x-request-id. */
const withRequestId =
  (id: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set("x-request-id", id);
    return next(req);
  };

/**
 * The request id a caller sends reaches the log only when it is a short printable id: anyone may
 * send it, before authentication, and the server logs a refused call at its default level.
 */
describe("the x-request-id in the server's log", () => {
  const dir = scratchDir("spillway-request-id-");
  let server: SpillwayProcess;
  beforeAll(async () => {
    const tokens = `${dir}/tokens`;
    await writeFile(tokens, `${sha256("the-only-token")} tenant-a\n`);
    server = await spawnSpillway(["--data-dir", `${dir}/data`, "--token-file", tokens]);
  });
  afterAll(() => server.stop());

  /**
   * Makes an unauthenticated call with `id` as its x-request-id and returns the line the server
   * logged its refusal with, parsed and as written.
   */
  async function refusedWith(id: string): Promise<{ line: Record<string, unknown>; raw: string }> {
    const before = server.output().split("\n").length;
    const client = createSpillwayClient({
      baseUrl: server.url,
      token: "not-a-token",
      interceptors: [withRequestId(id)],
      retry: { maxAttempts: 1 },
    });
    const err = await client.serverInfo().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Unauthenticated);
    // The line is written as the call ends; give the pipe a moment to carry it.
    const refusal = () =>
      server
        .output()
        .split("\n")
        .slice(before - 1)
        .find((raw) => raw.startsWith("{") && raw.includes('"msg":"call refused"'));
    for (let i = 0; i < 100 && refusal() === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const raw = refusal() ?? "";
    return { line: JSON.parse(raw) as Record<string, unknown>, raw };
  }

  it("logs a short printable id as sent", async () => {
    const id = `req:{7f}~!|${"0123456789abcdef".repeat(8)}`.slice(0, 128);
    expect(id).toHaveLength(128);
    const { line } = await refusedWith(id);
    expect(line).toMatchObject({ level: WARN, msg: "call refused", requestId: id });
    expect(line).not.toHaveProperty("droppedRequestIdChars");
  });

  it("logs a 60,000-character id by its length alone, under an id of its own", async () => {
    const huge = "R".repeat(60_000);
    const { line, raw } = await refusedWith(huge);
    expect(line).toMatchObject({
      level: WARN,
      code: "Unauthenticated",
      droppedRequestIdChars: 60_000,
    });
    expect(line.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(raw.length).toBeLessThan(1_000);
  });

  it("does not log an id one character too long, or one with a space, tab or control character", async () => {
    for (const id of ["a".repeat(129), "two words", "tab\there", "csi\u009b[2Jhere", "nel\u0085"]) {
      const { line, raw } = await refusedWith(id);
      expect(line.droppedRequestIdChars).toBeGreaterThan(0);
      expect(line.requestId).not.toBe(id);
      expect(raw).not.toContain(JSON.stringify(id).slice(1, -1));
    }
  });
});
