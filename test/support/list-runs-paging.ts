import { randomBytes } from "node:crypto";
import { expect } from "vitest";
import type { Backend } from "../../server/src/backends/backend.js";
import { listRuns } from "../../server/src/list-runs.js";
import { createRegistry } from "../../server/src/registry.js";
import { createRuns } from "../../server/src/runs.js";
import { inlineRecord } from "./inline-record.js";

/**
 * expectListRunsPagesEveryRunOnce stores runs whose ids sort differently in byte order and in
 * directory order (`a-c/` before `a/`, or after it), and a fork, in a fresh tenant of backend,
 * then pages through ListRuns at page sizes 1, 2 and 100: every run must come exactly once.
 */
export async function expectListRunsPagesEveryRunOnce(backend: Backend): Promise<void> {
  const registry = createRegistry(backend);
  const runs = createRuns(backend, registry);
  const tenant = `lr-${randomBytes(4).toString("hex")}`;
  const ids = ["a", "a-c", "a0", "a.b", "b", "a_", "a%"];
  for (const runId of ids) {
    for (const callId of ["c1", "c2"]) {
      await registry.commit(
        inlineRecord(tenant, runId, callId, `${runId} ${callId}\n`, Date.now()),
        runId,
      );
    }
  }
  await runs.fork(tenant, "a", "a-fork", undefined);
  const want = [...ids, "a-fork"].sort();
  const deps = { backend, registry, now: () => Date.now() };
  for (const pageSize of [1, 2, 100]) {
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await listRuns(deps, tenant, { pageSize, pageToken }, undefined, undefined);
      seen.push(...page.runs.map((r) => r.runId));
      expect(page.runs.every((r) => r.outputCount === 2n)).toBe(true);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    expect(seen.length, `page size ${pageSize}: ${seen}`).toBe(want.length);
    expect([...seen].sort()).toEqual(want);
  }
}
