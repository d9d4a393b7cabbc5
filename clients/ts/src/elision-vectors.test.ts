import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import {
  createElisionPolicy,
  type ElisionAction,
  type ElisionBand,
  type ElisionInput,
  type ElisionPolicyOptions,
  type ToolElisionOverride,
} from "./elision-policy.js";
import type { Summarizer } from "./summarize-action.js";

type VectorAction = "passthrough" | "spill" | { truncate: string } | VectorSummarize;
interface VectorSummarize {
  summarize: string;
  maxChars?: number;
  timeoutMs?: number;
}
interface VectorBand {
  upTo?: number;
  action: VectorAction;
}
interface Vector {
  name: string;
  policy: Omit<ElisionPolicyOptions, "bands" | "perTool"> & {
    bands: VectorBand[];
    perTool?: Record<string, { bands?: VectorBand[]; truncateBudget?: number }>;
  };
  content: { text: string } | { repeat: string; count: number } | { json: unknown };
  toolName?: string;
  call: string;
  expect: { kind: string; size: number; text: string; summaryFailure?: string };
}

const vectorsFile = new URL("../../../conformance/elision-vectors.json", import.meta.url);
const vectors: { vectors: Vector[] } = JSON.parse(readFileSync(vectorsFile, "utf8"));

/** The test summarizers the vector file describes, exactly as described. */
const summarizers: Record<string, Summarizer> = {
  "first-line": async (toolName, text) => {
    const newlines = text.split("\n").length - 1;
    return `${toolName} summary: ${text.split("\n", 1)[0]} (+${newlines} more lines)`;
  },
  throws: async () => {
    throw new Error("summarizer exploded");
  },
  hangs: (_tool, _text, { signal }) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve("late"), 1000);
      signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
    }),
  huge: async () => "S".repeat(1_000_000),
  empty: async () => " \n\t",
  "not-text": async () => 42 as unknown as string,
};

function action(a: VectorAction): ElisionAction {
  if (typeof a === "string") return a;
  if ("truncate" in a) return { truncate: a.truncate as "head" | "tail" | "head+tail" };
  const summarize = summarizers[a.summarize];
  if (summarize === undefined) throw new Error(`unknown summarizer ${a.summarize}`);
  return { ...a, summarize };
}

const bands = (list: VectorBand[]): ElisionBand[] =>
  list.map((b) => ({ ...b, action: action(b.action) }));

function vectorPolicy(v: Vector): ElisionPolicyOptions {
  const { perTool, ...rest } = v.policy;
  const overrides: Record<string, ToolElisionOverride> = {};
  for (const [pattern, o] of Object.entries(perTool ?? {})) {
    overrides[pattern] = {
      ...(o.truncateBudget === undefined ? {} : { truncateBudget: o.truncateBudget }),
      ...(o.bands === undefined ? {} : { bands: bands(o.bands) }),
    };
  }
  return {
    ...rest,
    bands: bands(v.policy.bands),
    ...(perTool === undefined ? {} : { perTool: overrides }),
  };
}

function content(spec: Vector["content"]): ElisionInput["content"] {
  if ("text" in spec) return spec.text;
  if ("json" in spec) return { json: spec.json };
  let text = "";
  for (let i = 1; i <= spec.count; i++) text += spec.repeat.replaceAll("%d", String(i));
  return text;
}

describe("elision vectors (conformance/elision-vectors.json)", () => {
  let t: TestServer;
  let client: SpillwayClient;

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("has vectors", () => {
    expect(vectors.vectors.length).toBeGreaterThan(20);
  });

  for (const v of vectors.vectors) {
    it(v.name, async () => {
      const policy = createElisionPolicy(vectorPolicy(v));
      const runId = `vec-${Math.random().toString(36).slice(2, 10)}`;
      const r = await policy.apply({
        key: { tenant: "dev", runId, callId: v.call },
        content: content(v.content),
        client,
        ...(v.toolName === undefined ? {} : { toolName: v.toolName }),
      });
      expect({
        kind: r.kind,
        size: r.size,
        text: r.text,
        ...(r.summaryFailure === undefined ? {} : { summaryFailure: r.summaryFailure.reason }),
      }).toEqual(v.expect);
      // Nothing is lost: whatever the summarizer did, a stored output reads back whole.
      if (r.attachment !== undefined) {
        const chunks: Uint8Array[] = [];
        for await (const chunk of client.readBytes(runId, r.attachment.handle)) chunks.push(chunk);
        const stored = Buffer.concat(chunks).toString("utf8");
        const given = content(v.content);
        expect(stored).toBe(typeof given === "string" ? given : JSON.stringify(given.json));
      }
    });
  }
});
