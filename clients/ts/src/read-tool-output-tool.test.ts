import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import type { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import {
  createReadToolOutputExecutor,
  createReadToolOutputRunner,
  readToolOutputTool,
} from "./read-tool-output-tool.js";

describe("read_tool_output tool against a live server", () => {
  let t: TestServer;
  let client: SpillwayClient;
  let read: (args: unknown) => Promise<string>;
  const runId = "tool";

  /** rendered reads a window with the generated client, independently of the SDK. */
  async function rendered(window: MessageInitShape<typeof ReadToolOutputRequestSchema>["window"]) {
    for await (const frame of t.raw().readToolOutput({ runId, handle: "res_log", window })) {
      if (frame.frame.case === "trailer") return frame.frame.value.rendered;
    }
    throw new Error("no trailer");
  }

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
    const log = Array.from({ length: 300 }, (_, i) =>
      i % 50 === 0 ? `ERROR step ${i + 1} failed` : `ok step ${i + 1}`,
    ).join("\n");
    await client.offload({ tenant: "dev", runId, callId: "log" }, log);
    read = createReadToolOutputExecutor(client, { runId });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("declares the tool for a model", () => {
    expect(readToolOutputTool.name).toBe("read_tool_output");
    const params = readToolOutputTool.parameters as {
      required: string[];
      properties: Record<string, { type: string }>;
    };
    expect(params.required).toEqual(["handle"]);
    expect(Object.keys(params.properties)).toEqual(
      expect.arrayContaining([
        "handle",
        "offset",
        "limit",
        "from_end",
        "pattern",
        "regex",
        "bytes",
      ]),
    );
    expect(params.properties.bytes?.type).toBe("boolean");
    expect(readToolOutputTool.description).toContain("from_end");
  });

  it("returns the server-rendered lines window exactly", async () => {
    const text = await read({ handle: "res_log", offset: 10, limit: 5 });
    expect(text).toBe(await rendered({ case: "lines", value: { offset: 10n, limit: 5 } }));
    expect(text).toContain("ok step 11");
    expect(text).not.toContain("ok step 16");
  });

  it("returns a tail window", async () => {
    const text = await read(JSON.stringify({ handle: "res_log", limit: 3, from_end: true }));
    expect(text).toBe(await rendered({ case: "lines", value: { limit: 3, fromEnd: true } }));
    expect(text).toContain("ok step 300");
  });

  it("returns a search window", async () => {
    const args = { handle: "res_log", pattern: "error step \\d+", regex: true, ignore_case: true };
    const text = await read({ ...args, context: 1, skip: 1, limit: 2 });
    expect(text).toBe(
      await rendered({
        case: "search",
        value: {
          pattern: args.pattern,
          regex: true,
          ignoreCase: true,
          contextLines: 1,
          skip: 1n,
          maxMatches: 2,
        },
      }),
    );
    expect(text).toContain("ERROR step 51");
    expect(text).not.toContain("ERROR step 1 ");
  });

  it("asks for the rendered text only, and shows the whole window's text", async () => {
    const frames: string[][] = [];
    const sent: MessageInitShape<typeof ReadToolOutputRequestSchema>[] = [];
    const recording: SpillwayClient = {
      ...client,
      readToolOutput: async (request, call) => {
        sent.push(request);
        const window = await client.readToolOutput(request, call);
        frames.push(window.frames.map((f) => f.frame.case ?? ""));
        return window;
      },
    };
    const tool = createReadToolOutputExecutor(recording, { runId });
    const lines = await tool({ handle: "res_log", offset: 40, limit: 20 });
    const search = await tool({ handle: "res_log", pattern: "ERROR", context: 1 });
    expect(sent.map((r) => r.renderedOnly)).toEqual([true, true]);
    expect(frames).toEqual([
      ["header", "trailer"],
      ["header", "trailer"],
    ]);
    expect(lines).toBe(await rendered({ case: "lines", value: { offset: 40n, limit: 20 } }));
    expect(search).toBe(
      await rendered({ case: "search", value: { pattern: "ERROR", contextLines: 1 } }),
    );
  });

  it("pages a search with the cursor of its last window, the text unchanged", async () => {
    const sent: MessageInitShape<typeof ReadToolOutputRequestSchema>[] = [];
    const recording: SpillwayClient = {
      ...client,
      readToolOutput: (request, call) => {
        sent.push(request);
        return client.readToolOutput(request, call);
      },
    };
    const paging = createReadToolOutputExecutor(recording, { runId });
    const args = { handle: "res_log", pattern: "ERROR", context: 2, limit: 2 };
    const afterOf = (k: number) => {
      const window = sent[k]?.window;
      return window?.case === "search" ? window.value.after : undefined;
    };
    const pages: string[] = [];
    for (const skip of [0, 2, 4]) pages.push(await paging({ ...args, skip }));
    expect(afterOf(0)).toBeUndefined();
    expect(afterOf(1)).toMatchObject({ line: 50n, matchesBefore: 1n });
    expect(afterOf(2)).toMatchObject({ line: 150n, matchesBefore: 3n });
    for (const [k, skip] of [0, 2, 4].entries()) {
      const bySkip = await rendered({
        case: "search",
        value: { pattern: "ERROR", contextLines: 2, maxMatches: 2, skip: BigInt(skip) },
      });
      expect(pages[k]).toBe(bySkip);
    }
    expect(pages[2]).toContain("ERROR step 201");
    // Going back, or another pattern, reads without the cursor.
    await paging({ ...args, skip: 0 });
    await paging({ ...args, pattern: "ok", skip: 4 });
    expect(afterOf(3)).toBeUndefined();
    expect(afterOf(4)).toBeUndefined();
  });

  it("returns a bytes window, also when asked with mode=bytes", async () => {
    const text = await read({ handle: "res_log", bytes: true, offset: 4, limit: 20 });
    expect(text).toBe(await rendered({ case: "bytes", value: { offset: 4n, limit: 20n } }));
    expect(await read({ handle: "res_log", mode: "bytes", offset: 4, limit: 20 })).toBe(text);
  });

  it("pages the JSON view with json=true or mode=json, and says when there is none", async () => {
    await client.offload(
      { tenant: "dev", runId, callId: "doc" },
      JSON.stringify({ items: [1, 2], ok: true }),
    );
    const text = await read({ handle: "res_doc", json: true, offset: 1, limit: 2 });
    expect(text).toBe(
      '[res_doc] JSON view (pretty-printed) lines 2-3 of 7 (25 bytes)\n     2\t  "items": [\n     3\t    1,\n[more: json offset=3]\n',
    );
    expect(await read({ handle: "res_doc", mode: "json", offset: 1, limit: 2 })).toBe(text);
    expect(await read({ handle: "res_log", json: true })).toMatch(
      /^error: failed_precondition: "res_log" is neither a JSON document nor JSON Lines/,
    );
    expect(await read({ handle: "res_doc", json: true, bytes: true })).toBe(
      "error: bytes and json cannot be combined",
    );
    expect(await read({ handle: "res_doc", json: true, pattern: "x" })).toBe(
      "error: pattern cannot be combined with json",
    );
  });

  it("answers bad arguments with a short error instead of throwing", async () => {
    expect(await read({})).toBe("error: handle must be a non-empty string");
    expect(await read("{not json")).toBe("error: arguments are not valid JSON");
    expect(await read(["res_log"])).toBe("error: arguments must be an object with a handle");
    expect(await read({ handle: "res_log", offset: -1 })).toBe(
      "error: offset must be an integer >= 0",
    );
    expect(await read({ handle: "res_log", limit: 1.5 })).toBe(
      "error: limit must be an integer >= 1",
    );
    expect(await read({ handle: "res_log", lines: 3 })).toBe('error: unknown argument "lines"');
    expect(await read({ handle: "res_log", regex: true })).toBe("error: regex needs a pattern");
    expect(await read({ handle: "res_log", pattern: "x", bytes: true })).toMatch(
      /^error: pattern cannot be combined/,
    );
    expect(await read({ handle: "res_log", context: 21, pattern: "x" })).toBe(
      "error: context must be an integer from 0 to 20",
    );
  });

  it("turns a forged handle into invalid_deferred_handle", async () => {
    const text = await read({ handle: "res_someone-else" });
    expect(text).toMatch(/^error: invalid_deferred_handle: /);
    expect(text).not.toContain("[permission_denied]");
  });

  it("names the code of other server refusals", async () => {
    const text = await read({ handle: "res_log", pattern: "(", regex: true });
    expect(text).toMatch(/^error: invalid_argument: /);
  });

  it("gives the runner's text as the executor's, with a refusal's gRPC code", async () => {
    const run = createReadToolOutputRunner(client, { runId });
    const cases: [unknown, Code | undefined][] = [
      [{ handle: "res_log", offset: 10, limit: 2 }, undefined],
      [{ handle: "res_someone-else" }, Code.PermissionDenied],
      [{ handle: "res_log", pattern: "(", regex: true }, Code.InvalidArgument],
      [{ handle: "res_log", offset: -1 }, Code.InvalidArgument],
    ];
    for (const [args, code] of cases) {
      expect(await run(args)).toEqual({ text: await read(args), code });
    }
  });
});
