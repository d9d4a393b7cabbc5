import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CpuTurns, createCpuTurns, unsliced } from "../server/src/cpu-turns.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

const tokens = { "token-of-a": "a", "token-of-b": "b" };

/** A JSON document of `items` records, every 400th one failed. */
function jsonDocument(items: number): Buffer {
  const records = Array.from({ length: items }, (_, k) =>
    JSON.stringify({ id: k, status: k % 400 === 0 ? "failed" : "ok", note: "x".repeat(40) }),
  );
  return Buffer.from(`{"items":[${records.join(",")}]}`);
}

/** A log of `lines` lines, `needle` on every 2,000th one. */
function log(lines: number): Buffer {
  const out = Array.from(
    { length: lines },
    (_, k) => `${k} request served in ${k % 97} ms${k % 2000 === 7 ? " needle" : ""}`,
  );
  return Buffer.from(`${out.join("\n")}\n`);
}

describe("CPU turns in the server", () => {
  // Tenant a's computations take a turn before every piece of their work but the first, and
  // the test alone grants turns; tenant b's never wait.
  const granted: (() => void)[] = [];
  const turnsOfA = createCpuTurns({ sliceMs: 0, schedule: (grant) => granted.push(grant) });
  const turns: CpuTurns = {
    begin: (owner) => (owner === "a" ? turnsOfA.begin(owner) : unsliced),
  };
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ tokens, turns });
  });
  afterAll(() => t.stop());

  it("runs a tenant's offload pass, JSONPath scan and search in its turns while other calls go on", async () => {
    const a = t.sdk("token-of-a");
    const b = t.sdk("token-of-b");
    const document = jsonDocument(20_000);
    const text = log(100_000);
    const settled: string[] = [];
    const track = <T>(name: string, call: Promise<T>) =>
      call.then((value) => {
        settled.push(name);
        return value;
      });
    const docOffload = track(
      "offload",
      a.offload({ tenant: "a", runId: "r", callId: "doc" }, document, {
        contentType: "application/json",
      }),
    );
    const logOffload = track("log", a.offload({ tenant: "a", runId: "r", callId: "log" }, text));
    // While a's offloads wait for turns, b's calls are served.
    const theirs = await b.offload({ tenant: "b", runId: "r", callId: "log" }, text);
    const window = await b.readToolOutput({
      runId: "r",
      handle: theirs.handle,
      window: { case: "search", value: { pattern: "needle", maxMatches: 100 } },
    });
    expect(window.trailer?.totalMatches).toBe(50n);
    expect(settled).toEqual([]);
    expect(granted.length).toBeGreaterThan(0);

    let grants = 0;
    const pump = async <T>(call: Promise<T>): Promise<T> => {
      let done = false;
      const result = call.finally(() => {
        done = true;
      });
      while (!done) {
        const grant = granted.shift();
        if (grant !== undefined) {
          grant();
          grants++;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
      return result;
    };
    const [doc, logged] = await pump(Promise.all([docOffload, logOffload]));
    // The pass saw every byte, a piece at a time.
    expect(doc.sha256).toBe(createHash("sha256").update(document).digest("hex"));
    expect(logged.sha256).toBe(theirs.sha256);
    expect(grants).toBeGreaterThanOrEqual(Math.ceil(document.length / (256 * 1024)) - 1);

    grants = 0;
    const query = track(
      "jsonPath",
      a.readToolOutput({
        runId: "r",
        handle: doc.handle,
        window: {
          case: "jsonPath",
          value: { query: "$.items[?@.status == 'failed'].id", maxMatches: 100 },
        },
      }),
    );
    const search = track(
      "search",
      a.readToolOutput({
        runId: "r",
        handle: logged.handle,
        window: { case: "search", value: { pattern: "needle", maxMatches: 100 } },
      }),
    );
    expect(await b.stat("r", theirs.handle)).toMatchObject({ sizeBytes: theirs.sizeBytes });
    expect(settled.sort()).toEqual(["log", "offload"]);
    const [found, matched] = await pump(Promise.all([query, search]));
    expect(found.trailer?.totalMatches).toBe(50n);
    expect(matched.trailer?.totalMatches).toBe(50n);
    // The JSONPath scan took a turn for each 64 KiB of the document.
    expect(grants).toBeGreaterThanOrEqual(Math.ceil(document.length / (64 * 1024)) - 1);
  });
});
