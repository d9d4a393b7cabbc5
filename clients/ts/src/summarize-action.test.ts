import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import { createElisionPolicy, type ElisionPolicyOptions } from "./elision-policy.js";
import type { Summarizer } from "./summarize-action.js";

const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join("\n");
const summarizeAll = (summarize: Summarizer, extra: object = {}): ElisionPolicyOptions => ({
  bands: [{ action: { summarize, ...extra } }],
});

function thrown(f: () => unknown): ConnectError {
  try {
    f();
  } catch (e) {
    if (e instanceof ConnectError) return e;
    throw e;
  }
  throw new Error("did not throw");
}

describe("summarize against a live server", () => {
  let t: TestServer;
  let client: SpillwayClient;
  const key = (callId: string) => ({ tenant: "dev", runId: "summ", callId });

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("gives the summarizer the tool name, the full text and the stored handle", async () => {
    const seen: unknown[] = [];
    const content = lines(300);
    const policy = createElisionPolicy(
      summarizeAll((tool, text, { handle }) => {
        seen.push({ tool, text, handle });
        return `${tool}: ${text.length} chars`;
      }),
    );
    const r = await policy.apply({ key: key("args"), content, client, toolName: "build" });
    expect(seen).toEqual([{ tool: "build", text: content, handle: "res_args" }]);
    expect(r.kind).toBe("summarized");
    expect(r.text.split("\n")[1]).toBe(`build: ${content.length} chars`);
    expect(r.text).toContain('read_tool_output(handle="res_args", offset=0)');
    const stat = await client.stat("summ", "res_args");
    expect(stat.lineCount).toBe(300n);
  });

  it("falls back when a synchronous summarizer throws", async () => {
    const policy = createElisionPolicy(
      summarizeAll(() => {
        throw new TypeError("bad\nsecond line");
      }),
    );
    const r = await policy.apply({ key: key("sync-throw"), content: lines(300), client });
    expect(r.kind).toBe("spilled");
    expect(r.summaryFailure).toEqual({ reason: "threw", message: "the summarizer threw: bad" });
    expect(r.text).toBe((await client.stat("summ", "res_sync-throw")).preview?.text);
  });

  it("stops waiting at timeoutMs for a summarizer that never answers and aborts its signal", async () => {
    let aborted = false;
    const policy = createElisionPolicy(
      summarizeAll(
        (_tool, _text, { signal }) => {
          signal.addEventListener("abort", () => {
            aborted = true;
          });
          return new Promise<string>(() => {});
        },
        { timeoutMs: 50 },
      ),
    );
    const started = performance.now();
    const r = await policy.apply({ key: key("never"), content: lines(300), client });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(r.kind).toBe("spilled");
    expect(r.summaryFailure?.reason).toBe("timeout");
    expect(aborted).toBe(true);
  });

  it("falls back when the caller cancels during the summary", async () => {
    const controller = new AbortController();
    const policy = createElisionPolicy(
      summarizeAll(() => {
        setTimeout(() => controller.abort(), 10);
        return new Promise<string>(() => {});
      }),
    );
    const r = await policy.apply({
      key: key("cancelled"),
      content: lines(300),
      client,
      call: { signal: controller.signal },
    });
    expect(r.kind).toBe("spilled");
    expect(r.summaryFailure?.message).toContain("cancelled");
  });

  it("shows the spilled view, bounded, for a summary over maxChars", async () => {
    const policy = createElisionPolicy(summarizeAll(() => "S".repeat(5_000_000)));
    const r = await policy.apply({ key: key("huge"), content: lines(3000), client });
    expect(r.kind).toBe("spilled");
    expect(r.summaryFailure?.reason).toBe("too_long");
    expect(r.text.length).toBeLessThan(5000);
  });

  it("never calls the summarizer when the spill is refused, and rethrows as spill does", async () => {
    let calls = 0;
    const policy = createElisionPolicy(
      summarizeAll(() => {
        calls++;
        return "s";
      }),
    );
    // A key naming its attempt: other bytes for it are refused, not spilled as the next attempt.
    const twice = { ...key("twice"), attempt: 1 };
    await policy.apply({ key: twice, content: "first", client });
    const err = await policy
      .apply({ key: twice, content: "different", client })
      .catch((e: unknown) => e);
    expect((err as ConnectError).code).toBe(Code.AlreadyExists);
    expect(calls).toBe(1);
  });

  it("refuses bad options with INVALID_ARGUMENT", () => {
    const s: Summarizer = () => "s";
    const bad: ElisionPolicyOptions[] = [
      summarizeAll(s, { maxChars: 0 }),
      summarizeAll(s, { timeoutMs: 1.5 }),
      { bands: [{ action: { summarize: "nope" as unknown as Summarizer } }] },
      { bands: [{ action: "spill" }], perTool: { "": { truncateBudget: 1 } } },
      { bands: [{ action: "spill" }], perTool: { x: { bands: [] } } },
      {
        bands: [{ action: "spill" }],
        perTool: { x: { bands: [{ action: { summarize: s, maxChars: -1 } }] } },
      },
      { bands: [{ action: "spill" }], perTool: { x: { truncateBudget: -1 } } },
      { bands: [{ action: "spill" }], include: [] },
      { bands: [{ action: "spill" }], perTool: { x: [{ action: "spill" }] as unknown as object } },
      { bands: [{ action: "spill" }], exclude: [""] },
    ];
    for (const opts of bad) {
      expect(thrown(() => createElisionPolicy(opts)).code).toBe(Code.InvalidArgument);
    }
  });
});

describe("summarize when the service is down", () => {
  let client: SpillwayClient;
  const key = { tenant: "dev", runId: "down", callId: "c" };

  beforeAll(async () => {
    const t = await startTestServer();
    const url = t.url;
    await t.stop();
    client = createSpillwayClient({ baseUrl: url, retry: { baseDelayMs: 1 } });
  });

  it("shows the local preview without calling the summarizer under best_effort", async () => {
    let calls = 0;
    const policy = createElisionPolicy({
      ...summarizeAll(() => {
        calls++;
        return "s";
      }),
      truncateBudget: 20,
    });
    const r = await policy.apply({ key, content: lines(1000), client });
    expect(r.kind).toBe("preview_only");
    expect(r.text).toContain("full output not stored");
    expect(calls).toBe(0);
  });

  it("fails with blob_store_required under required preservation", async () => {
    const policy = createElisionPolicy({ ...summarizeAll(() => "s"), preservation: "required" });
    const err = await policy.apply({ key, content: lines(1000), client }).catch((e: unknown) => e);
    expect((err as ConnectError).message).toContain("blob_store_required");
  });
});
