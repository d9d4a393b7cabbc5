import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import { createElisionPolicy } from "./elision-policy.js";

const bands = [
  { upTo: 100, action: "passthrough" as const },
  { upTo: 1000, action: { truncate: "head+tail" as const } },
  { action: "spill" as const },
];

const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join("\n");

describe("ElisionPolicy against a live server", () => {
  let t: TestServer;
  let client: SpillwayClient;
  const key = (callId: string) => ({ tenant: "dev", runId: "elide", callId });

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("passes small results through unchanged", async () => {
    const policy = createElisionPolicy({ bands });
    const r = await policy.apply({ key: key("small"), content: "short output", client });
    expect(r).toEqual({ kind: "passthrough", text: "short output", size: 12 });
  });

  it("truncates the middle band to its budget with a marker", async () => {
    const policy = createElisionPolicy({ bands, truncateBudget: 40 });
    const content = "a".repeat(300) + "z".repeat(300);
    const r = await policy.apply({ key: key("mid"), content, client });
    expect(r.kind).toBe("truncated");
    expect(r.text).toBe(`${"a".repeat(20)}\n[… 560 of 600 chars omitted …]\n${"z".repeat(20)}`);
    expect(r.attachment).toBeUndefined();
    expect(await client.list("elide").then((p) => p.attachments.length)).toBe(0);
  });

  it("spills large results and shows the server's preview", async () => {
    const policy = createElisionPolicy({ bands });
    const content = lines(500);
    const r = await policy.apply({ key: key("big"), content, client, offload: { name: "build" } });
    expect(r.kind).toBe("spilled");
    expect(r.attachment?.handle).toBe("res_big");
    const stat = await client.stat("elide", "res_big");
    expect(r.text).toBe(stat.preview?.text);
    expect(r.text).toContain('read_tool_output(handle="res_big"');
    expect(stat.lineCount).toBe(500n);
  });

  it("spills JSON values as compact application/json", async () => {
    const policy = createElisionPolicy({ bands: [{ action: "spill" }] });
    const value = { items: Array.from({ length: 3 }, (_, i) => ({ id: i })) };
    const r = await policy.apply({ key: key("json"), content: { json: value }, client });
    expect(r.attachment?.contentType).toBe("application/json");
    expect(r.attachment?.sizeBytes).toBe(BigInt(JSON.stringify(value).length));
    expect(r.text).toContain("shape:");
  });

  it("measures estimated tokens as ceil(chars / 4)", async () => {
    const policy = createElisionPolicy({ bands, measure: "tokens" });
    const r = await policy.apply({ key: key("tokens"), content: "x".repeat(401), client });
    // 401 chars are 101 estimated tokens: past the 100-token passthrough band.
    expect(r.size).toBe(101);
    expect(r.kind).toBe("truncated");
    const within = await policy.apply({ key: key("tokens2"), content: "x".repeat(400), client });
    expect(within.kind).toBe("passthrough");
  });

  it("always passes read_tool_output results through", async () => {
    const policy = createElisionPolicy({ bands: [{ action: "spill" }] });
    const content = lines(2000);
    const r = await policy.apply({
      key: key("reader"),
      content,
      client,
      toolName: "read_tool_output",
    });
    expect(r.kind).toBe("passthrough");
    expect(r.text).toBe(content);
    expect((await client.list("elide")).attachments.map((a) => a.handle)).not.toContain(
      "res_reader",
    );
  });

  it("rethrows a spill the service refused", async () => {
    const policy = createElisionPolicy({ bands: [{ action: "spill" }] });
    await policy.apply({ key: { ...key("once"), attempt: 1 }, content: "first", client });
    const err = await policy
      .apply({ key: { ...key("once"), attempt: 1 }, content: "different", client })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.AlreadyExists);
  });

  it("spills a call id spilled again with other bytes as the call's next attempt", async () => {
    const policy = createElisionPolicy({ bands: [{ action: "spill" }] });
    const spill = (content: string, p = policy) =>
      p.apply({ key: key("retried"), content, client, offload: { name: "run_tests" } });
    const first = await spill("first run\nFAIL\n");
    const same = await spill("first run\nFAIL\n");
    const second = await spill("second run\nok\n");
    // Another policy (another process) finds the attempts through the server's answers.
    const third = await spill(
      "third run\nok\n",
      createElisionPolicy({ bands: [{ action: "spill" }] }),
    );
    expect([first, same, second, third].map((r) => r.attachment?.handle)).toEqual([
      "res_retried",
      "res_retried",
      "res@2_retried",
      "res@3_retried",
    ]);
    expect(second.attachment?.attempt).toBe(2);
    expect(second.text.split("\n")[0]).toBe(
      "[res@2_retried] run_tests · 14 bytes · attempt 2 · 2 lines",
    );
    expect(first.text).not.toContain("attempt");
    const read = async (handle: string) =>
      (await client.readToolOutput({ runId: "elide", handle })).rendered;
    expect(await read("res_retried")).toContain("first run");
    expect(await read("res@2_retried")).toContain("second run");
    const listed = (await client.list("elide")).attachments.map((a) => a.handle);
    const at = listed.indexOf("res_retried");
    expect(listed.slice(at, at + 3)).toEqual(["res_retried", "res@2_retried", "res@3_retried"]);
  });

  it("passes a value with no JSON text through as nothing, and stores nothing", async () => {
    const spillAll = createElisionPolicy({ bands: [{ action: "spill" }] });
    const perTool = createElisionPolicy({
      bands: [{ action: "spill" }],
      perTool: { "build_*": { bands: [{ action: "spill" }] } },
    });
    for (const json of [undefined, () => 1, Symbol("x")]) {
      for (const [policy, toolName] of [
        [spillAll, undefined],
        [perTool, "build_log"],
        [spillAll, "read_tool_output"],
      ] as const) {
        const r = await policy.apply({ key: key("nothing"), content: { json }, client, toolName });
        expect(r, `${String(json)} ${toolName}`).toEqual({
          kind: "passthrough",
          text: "",
          size: 0,
        });
      }
    }
    expect((await client.list("elide")).attachments.map((a) => a.handle)).not.toContain(
      "res_nothing",
    );
  });

  it("refuses a JSON value JSON cannot write with INVALID_ARGUMENT, storing nothing", async () => {
    const policy = createElisionPolicy({
      bands: [{ upTo: 1000, action: "passthrough" }, { action: "spill" }],
    });
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const json of [10n, cycle, { nested: [1n] }]) {
      const err = await policy
        .apply({ key: key("unwritable"), content: { json }, client })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      expect((err as ConnectError).rawMessage).toMatch(
        /^elision policy: the JSON value cannot be written as JSON: /,
      );
    }
    expect((await client.list("elide")).attachments.map((a) => a.handle)).not.toContain(
      "res_unwritable",
    );
  });

  it("refuses invalid bands", () => {
    expect(() => createElisionPolicy({ bands: [] })).toThrow(/must not be empty/);
    expect(() => createElisionPolicy({ bands: [{ upTo: 5, action: "spill" }] })).toThrow(
      /last band/,
    );
    expect(() =>
      createElisionPolicy({
        bands: [
          { upTo: 50, action: "passthrough" },
          { upTo: 10, action: "passthrough" },
          { action: "spill" },
        ],
      }),
    ).toThrow(/larger than the one before/);
  });
});

describe("ElisionPolicy when the service is down", () => {
  let client: SpillwayClient;
  const key = { tenant: "dev", runId: "down", callId: "c" };
  const content = lines(1000);

  beforeAll(async () => {
    const t = await startTestServer();
    const url = t.url;
    await t.stop();
    client = createSpillwayClient({ baseUrl: url, retry: { baseDelayMs: 1 } });
  });

  it("falls back to a local preview without a handle under best_effort", async () => {
    const policy = createElisionPolicy({
      bands,
      truncateBudget: 20,
      fallback: { truncate: "tail" },
    });
    const r = await policy.apply({ key, content, client });
    expect(r.kind).toBe("preview_only");
    expect(r.attachment).toBeUndefined();
    expect(r.text).toMatch(/^\[… \d+ of \d+ chars omitted …\]\n/);
    expect(r.text).toContain("line 1000");
    expect(r.text).toContain("full output not stored");
    expect(r.text).not.toContain("res_c");
  });

  it("fails with blob_store_required when preservation is required", async () => {
    const policy = createElisionPolicy({ bands, preservation: "required" });
    const err = await policy.apply({ key, content, client }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unavailable);
    expect((err as ConnectError).message).toContain("blob_store_required");
  });

  it("still passes through and truncates without the service", async () => {
    const policy = createElisionPolicy({ bands, preservation: "required" });
    expect((await policy.apply({ key, content: "tiny", client })).kind).toBe("passthrough");
    expect((await policy.apply({ key, content: lines(50), client })).kind).toBe("truncated");
  });
});
