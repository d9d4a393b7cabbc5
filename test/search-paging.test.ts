import { Code, ConnectError } from "@connectrpc/connect";
import type { Window } from "@spillway/client";
import { createReadToolOutputExecutor } from "@spillway/client";
import type { SearchCursor } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countingReads } from "./support/counting-reads.js";
import { serviceBackends, startTestServer, type TestServer } from "./support/test-server.js";

/** The fields of a search window a page sets. */
interface SearchPage {
  readonly skip?: bigint;
  readonly contextLines?: number;
  readonly after?: SearchCursor | undefined;
}

/**
 * Paging a search by its trailer's cursor over the wire: every page is the page `skip` alone
 * gives, the pages together hold every match once, and reading all of them reads the payload
 * about once (counted at the backend), where paging by skip alone rescans it for every page.
 */
describe.each(serviceBackends)("search paging by cursor over the wire  (%s)", (backendKind) => {
  let t: TestServer;
  let bytesRead = 0;
  const total = 300_000;
  const lineText = (n: number) => `entry ${n} ${n % 100 === 3 ? "Needle" : "hay"}`;
  const text = `${Array.from({ length: total }, (_, i) => lineText(i + 1)).join("\r\n")}\r\n`;
  const payloadBytes = Buffer.byteLength(text);
  const search = (value: SearchPage): Promise<Window> =>
    t.sdk().readToolOutput({
      runId: "p",
      handle: "res_log",
      window: { case: "search", value: { pattern: "needle", ignoreCase: true, ...value } },
    });

  /** Pages through every match, by cursor or by skip alone; returns the pages' texts. */
  async function pageAll(byCursor: boolean, contextLines: number): Promise<string[]> {
    const pages: string[] = [];
    let skip = 0n;
    let after: SearchCursor | undefined;
    for (;;) {
      const w = await search({ skip, contextLines, ...(byCursor ? { after } : {}) });
      pages.push(w.rendered);
      if (w.trailer?.nextOffset === undefined) return pages;
      expect(w.trailer.searchCursor?.matchesBefore).toBe(w.trailer.nextOffset - 1n);
      skip = w.trailer.nextOffset;
      after = w.trailer.searchCursor;
    }
  }

  beforeAll(async () => {
    t = await startTestServer({
      backend: backendKind,
      limits: { indexStride: 64 },
      wrapBackend: countingReads((n) => {
        bytesRead += n;
      }),
    });
    await t.sdk().offload({ tenant: "dev", runId: "p", callId: "log" }, text, {
      contentType: "text/plain",
    });
  });
  afterAll(() => t.stop());

  it("gives every page exactly as skip does, with context, and reads the payload about once", async () => {
    bytesRead = 0;
    const byCursor = await pageAll(true, 2);
    const cursorBytes = bytesRead;
    bytesRead = 0;
    const bySkip = await pageAll(false, 2);
    const skipBytes = bytesRead;
    expect(byCursor).toEqual(bySkip);
    // 30 full pages; the last stops after its context, so a 31st finds nothing after it.
    expect(byCursor).toHaveLength(31);
    expect(byCursor.at(-1)).toMatch(/\[no more matches\]\n$/);
    expect(byCursor.join("")).toContain(`     3:\t${lineText(3)}\n`);
    expect(byCursor.join("")).toContain(`\t${lineText(299_903)}\n`);
    // Each page reads at most about twice what it scans (ranges double), and the line index.
    expect(cursorBytes).toBeLessThan(2.5 * payloadBytes);
    expect(skipBytes).toBeGreaterThan(10 * payloadBytes);
  });

  it("refuses a cursor issued for another payload or another search", async () => {
    const first = await search({});
    const cursor = first.trailer?.searchCursor;
    expect(cursor?.check).not.toBe("");
    const sdk = t.sdk();
    const refusal = (runId: string, pattern: string) =>
      sdk
        .readToolOutput({
          runId,
          handle: "res_log",
          window: {
            case: "search",
            value: { pattern, ignoreCase: true, skip: 100n, after: cursor },
          },
        })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
    // The same lines, so the cursor starts a line there too, but other bytes.
    await sdk.offload({ tenant: "dev", runId: "other", callId: "log" }, text.toUpperCase());
    for (const err of [await refusal("other", "needle"), await refusal("p", "entry")]) {
      expect(err?.code).toBe(Code.InvalidArgument);
      expect(err?.rawMessage).toMatch(/^search\.after: issued for another payload or search/);
    }
  });

  it("pages a search right through the executor after the run's handle was reused", async () => {
    const sdk = t.sdk();
    const key = { tenant: "dev", runId: "reused", callId: "log" };
    const lines = (every: number) =>
      Array.from({ length: 400 }, (_, i) => `${i % every === 0 ? "ERROR" : "fine "} ${i}`);
    await sdk.offload(key, `${lines(2).join("\n")}\n`);
    const readToolOutput = createReadToolOutputExecutor(sdk, { runId: "reused" });
    const args = { handle: "res_log", pattern: "ERROR", limit: 3 };
    expect(await readToolOutput(args)).toContain("[more matches: skip=3]");
    await sdk.deleteRun("reused");
    // Same line lengths, other matches: the remembered cursor starts a line here too.
    await sdk.offload(key, `${lines(5).join("\n")}\n`);
    const page = await readToolOutput({ ...args, skip: 3 });
    const truth = await sdk.readToolOutput({
      runId: "reused",
      handle: "res_log",
      window: { case: "search", value: { pattern: "ERROR", maxMatches: 3, skip: 3n } },
    });
    expect(page).toBe(truth.rendered);
    expect(page).toContain("ERROR 15");
  });

  it("refuses a cursor that does not fit the payload, and one breaking the proto rules", async () => {
    const first = await search({});
    const cursor = first.trailer?.searchCursor;
    expect(cursor).toBeDefined();
    const refusal = (value: SearchPage) =>
      search(value).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    const shifted = await refusal({
      skip: 100n,
      after: { ...cursor, byteOffset: (cursor?.byteOffset ?? 0n) + 1n } as SearchCursor,
    });
    expect(shifted?.code).toBe(Code.InvalidArgument);
    expect(shifted?.rawMessage).toMatch(/^search\.after: byte \d+ does not start a line$/);
    const behind = await refusal({ skip: 10n, after: cursor });
    expect(behind?.code).toBe(Code.InvalidArgument);
    expect(behind?.rawMessage).toContain("skip (10) must be at least the cursor's matches_before");
    const negative = await refusal({
      skip: 100n,
      after: { ...cursor, byteOffset: -1n } as SearchCursor,
    });
    expect(negative?.code).toBe(Code.InvalidArgument);
    expect(negative?.rawMessage).toContain("byte_offset");
    // A cursor far past the end would claim a false total: refused, and the server keeps serving.
    const past = await refusal({
      skip: 3000n,
      after: { ...cursor, byteOffset: 1n << 40n, line: 3n, matchesBefore: 3n } as SearchCursor,
    });
    expect(past?.code).toBe(Code.InvalidArgument);
    expect(past?.rawMessage).toMatch(
      /^search\.after: byte 1099511627776 is past the payload's end/,
    );
    expect((await search({})).rendered).toBe(first.rendered);
  });
});
