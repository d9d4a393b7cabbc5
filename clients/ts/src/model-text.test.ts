import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import { createElisionPolicy } from "./elision-policy.js";
import { modelText } from "./model-text.js";
import { createReadToolOutputExecutor } from "./read-tool-output-tool.js";

const vectors = (
  JSON.parse(
    readFileSync(new URL("../../../conformance/ansi-strip-vectors.json", import.meta.url), "utf8"),
  ) as { vectors: { name: string; input: string; stripped: string }[] }
).vectors;

const red = (text: string) => `\u001b[31m${text}\u001b[0m`;

describe("modelText", () => {
  it.each(vectors.map((v) => [v.name, v] as const))("strips vector %s", (_name, v) => {
    expect(modelText(v.input)).toBe(v.stripped);
    expect(modelText(v.input, true)).toBe(v.input);
  });
});

describe("terminal escape sequences in the SDK's model text, against a live server", () => {
  let t: TestServer;
  let client: SpillwayClient;
  const key = (callId: string) => ({ tenant: "dev", runId: "ansi", callId });
  const bands = [
    { upTo: 100, action: "passthrough" as const },
    { upTo: 1000, action: { truncate: "head+tail" as const } },
    { action: "spill" as const },
  ];

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("passes a coloured result through without its colour codes, measured as shown", async () => {
    const policy = createElisionPolicy({ bands });
    const r = await policy.apply({ key: key("small"), content: `${red("FAIL")} test_a`, client });
    expect(r).toEqual({ kind: "passthrough", text: "FAIL test_a", size: 11 });
    const kept = createElisionPolicy({ bands, keepAnsi: true });
    const k = await kept.apply({ key: key("small2"), content: red("FAIL"), client });
    expect(k.text).toBe(red("FAIL"));
  });

  it("truncates the visible text, so colour codes never take the budget", async () => {
    const policy = createElisionPolicy({ bands, truncateBudget: 10 });
    const content = red("a".repeat(150)) + red("z".repeat(150));
    const r = await policy.apply({ key: key("mid"), content, client });
    expect(r.text).toBe(`${"a".repeat(5)}\n[… 290 of 300 chars omitted …]\n${"z".repeat(5)}`);
  });

  it("spills the result as given and shows the server's stripped preview", async () => {
    const policy = createElisionPolicy({ bands });
    const content = Array.from({ length: 300 }, (_, i) => red(`line ${i + 1}`)).join("\n");
    const r = await policy.apply({ key: key("big"), content, client });
    expect(r.kind).toBe("spilled");
    expect(r.text).not.toContain("\u001b");
    expect(r.text).toContain("line 1\nline 2\n");
    const bytes: Uint8Array[] = [];
    for await (const chunk of client.readBytes("ansi", "res_big")) bytes.push(chunk);
    expect(Buffer.concat(bytes).toString("utf8")).toBe(content);
  });

  it("lets the model tool keep the sequences with keep_ansi", async () => {
    await client.offload(key("tool"), `${red("ERROR")} disk full\nok\n`);
    const run = createReadToolOutputExecutor(client, { runId: "ansi" });
    expect(await run({ handle: "res_tool" })).toContain("     1\tERROR disk full\n");
    expect(await run({ handle: "res_tool", keep_ansi: true })).toContain(
      `     1\t${red("ERROR")} disk full\n`,
    );
    expect(await run({ handle: "res_tool", pattern: "ERROR disk" })).toContain(
      "     1:\tERROR disk full\n",
    );
    expect(await run({ handle: "res_tool", pattern: "ERROR disk", keep_ansi: true })).toContain(
      "no matches",
    );
    expect(await run({ handle: "res_tool", keep_ansi: "yes" })).toBe(
      "error: keep_ansi must be true or false",
    );
  });
});
