import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createSpillwayClient } from "./client.js";
import { createReadToolOutputExecutor } from "./read-tool-output-tool.js";

interface Vector {
  name: string;
  args: string;
  error: string;
}

const vectors: { vectors: Vector[] } = JSON.parse(
  readFileSync(new URL("../../../conformance/tool-args-vectors.json", import.meta.url), "utf8"),
);

describe("read_tool_output argument vectors (conformance/tool-args-vectors.json)", () => {
  // Nothing listens here: arguments the tool wrongly accepted would answer `error: unavailable`.
  const run = createReadToolOutputExecutor(
    createSpillwayClient({ baseUrl: "http://127.0.0.1:9" }),
    {
      runId: "run-args",
    },
  );

  it("has vectors", () => {
    expect(vectors.vectors.length).toBeGreaterThan(20);
  });

  for (const v of vectors.vectors) {
    it(v.name, async () => {
      expect(await run(v.args)).toBe(`error: ${v.error}`);
    });
  }
});
