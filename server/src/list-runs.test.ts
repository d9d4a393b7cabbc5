import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { inlineRecord } from "../../test/support/inline-record.js";
import { bytesBody } from "./backends/body.js";
import { createMemoryBackend } from "./backends/memory.js";
import { runMetaKey, runPrefix } from "./keys.js";
import { type ListRunsLog, listRuns } from "./list-runs.js";
import { encodeRunsPageToken } from "./page-token.js";
import { createRegistry } from "./registry.js";
import { createRuns } from "./runs.js";

const nowMs = 1_800_000_000_000;

/** A record of `text` in run runId, committed a second before the tests' clock. */
function record(tenant: string, runId: string, callId: string, text: string) {
  return inlineRecord(tenant, runId, callId, text, nowMs - 1000);
}

function setup() {
  const backend = createMemoryBackend();
  const registry = createRegistry(backend);
  const runs = createRuns(backend, registry, () => nowMs);
  const warnings: { key: unknown; err: unknown }[] = [];
  const log: ListRunsLog = {
    warn: (fields) => void warnings.push({ key: fields.key, err: fields.err }),
  };
  const list = (pageToken = "", pageSize = 0) =>
    listRuns({ backend, registry, now: () => nowMs }, "t", { pageSize, pageToken }, undefined, log);
  return { backend, registry, runs, warnings, list };
}

/** Replaces a fork's metadata with what forks stored before they named their own run. */
async function makeLegacy(backend: ReturnType<typeof createMemoryBackend>, runId: string) {
  const key = runMetaKey("t", runId);
  const meta = JSON.parse(Buffer.from(await readAll(backend, key)).toString()) as Record<
    string,
    unknown
  >;
  delete meta.runId;
  await backend.delete(key);
  await backend.put(key, bytesBody(Buffer.from(JSON.stringify(meta))));
}

async function readAll(backend: ReturnType<typeof createMemoryBackend>, key: string) {
  const parts: Uint8Array[] = [];
  for await (const part of await backend.get(key)) parts.push(part);
  return Buffer.concat(parts);
}

describe("listRuns", () => {
  it("names a fork from its stored metadata, and an old fork from a segment that is no digest", async () => {
    const { backend, registry, runs, warnings, list } = setup();
    const long = "é".repeat(60);
    await registry.commit(record("t", "parent", "c1", "one\n"), "parent");
    await runs.fork("t", "parent", "new-fork", undefined);
    await runs.fork("t", "parent", "old-fork", undefined);
    await runs.fork("t", "parent", long, undefined);
    await runs.fork("t", "parent", `${long}-old`, undefined);
    await makeLegacy(backend, "old-fork");
    await makeLegacy(backend, `${long}-old`);

    const page = await list();
    const ids = page.runs.map((r) => r.runId);
    // The digested old fork has no TTL and no output of its own: nothing stored names it.
    expect(ids.sort()).toEqual(["new-fork", "old-fork", "parent", long].sort());
    expect(page.runs.find((r) => r.runId === long)?.parentRunId).toBe("parent");
    expect(warnings).toEqual([
      { key: runPrefix("t", `${long}-old`), err: "no stored data names this run" },
    ]);
  });

  it("leaves out a run whose TTL object is corrupt and steps over stray keys, logging both", async () => {
    const { backend, registry, warnings, list } = setup();
    await registry.commit(record("t", "a", "c1", "a\n"), "a");
    await registry.commit(record("t", "b", "c1", "b\n"), "b");
    await backend.put(`${runPrefix("t", "a")}ttl`, bytesBody(Buffer.from("{not json")));
    await backend.put("t/t/r/stray", bytesBody(Buffer.from("x")));
    await backend.put("t/t/r/..%zz/h/x", bytesBody(Buffer.from("x")));
    const page = await list();
    expect(page.runs.map((r) => r.runId)).toEqual(["b"]);
    expect(warnings.map((w) => w.key).sort()).toEqual(
      [runPrefix("t", "a"), "t/t/r/..%zz/h/x", "t/t/r/stray"].sort(),
    );
  });

  it("never lists a run twice for a key planted past the point its listing skips to", async () => {
    const { backend, registry, warnings, list } = setup();
    for (const runId of ["a", "b", "c"]) {
      await registry.commit(record("t", runId, "c1", "x\n"), runId);
    }
    // Above DEL: byte order lists it after "t/t/r/a/\u007f", where a's skip resumes.
    await backend.put("t/t/r/a/\u00e9", bytesBody(Buffer.from("planted")));
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await list(pageToken, 1);
      seen.push(...page.runs.map((r) => r.runId));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(seen).toEqual(["a", "b", "c"]);
    expect(warnings.map((w) => w.key)).toContain("t/t/r/a/\u00e9");
  });

  it("hides an expired run and refuses a token whose cursor no run could have", async () => {
    const { registry, runs, list } = setup();
    await registry.commit(record("t", "gone", "c1", "x\n"), "gone");
    await registry.commit(record("t", "kept", "c1", "x\n"), "kept");
    await runs.setTtl("t", "gone", 0);
    expect((await list()).runs.map((r) => r.runId)).toEqual(["kept"]);
    const forged = encodeRunsPageToken("t", "..");
    await expect(list(forged)).rejects.toMatchObject({ code: Code.InvalidArgument });
  });
});
