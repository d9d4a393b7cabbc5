import type { ReadToolOutputInit } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * Every server cap that cuts a window says so: `trailer.clipped` is true and the rendered text
 * names the cap, in lines, bytes and search mode; a window the caps did not cut is not clipped.
 * The caps are small so each one bites on a small payload.
 */
describe("window caps over the wire", () => {
  let t: TestServer;
  const caps = {
    maxWindowLines: 50,
    maxWindowChars: 5000,
    maxLineChars: 100,
    maxMatches: 10,
    maxBytesWindow: 1000,
    maxSearchLineBytes: 1000,
  };
  const lineText = (n: number) => `entry ${n} ${n % 7 === 0 ? "NEEDLE" : "hay"}`;
  const read = (handle: string, window: Omit<ReadToolOutputInit, "runId" | "handle">) =>
    t.sdk().readToolOutput({ runId: "c", handle, ...window });

  beforeAll(async () => {
    t = await startTestServer({ caps });
    const offload = (callId: string, text: string) =>
      t.sdk().offload({ tenant: "dev", runId: "c", callId }, text, { contentType: "text/plain" });
    await offload("log", `${Array.from({ length: 300 }, (_, i) => lineText(i + 1)).join("\n")}\n`);
    // A long match line, a long context line, and a line whose match lies past the search cap
    // (a line is searched up to max(maxSearchLineBytes, 16 bytes per shown character): 1,601).
    await offload("wide", `${"x".repeat(150)} NEEDLE\nshort\n`);
    await offload("ctx", `${"y".repeat(150)}\nNEEDLE\n`);
    await offload("deep", `${"z".repeat(2500)} NEEDLE\nNEEDLE\n`);
  });
  afterAll(() => t.stop());

  it("lines: a limit above max_window_lines is clipped and says the window was capped", async () => {
    const w = await read("res_log", { window: { case: "lines", value: { limit: 80 } } });
    expect(w.trailer?.returnedLines).toBe(50n);
    expect(w.trailer?.clipped).toBe(true);
    expect(w.rendered).toMatch(/\[window capped at 50 lines; more: offset=50\]\n$/);
    const within = await read("res_log", { window: { case: "lines", value: { limit: 50 } } });
    expect(within.trailer?.clipped).toBe(false);
    expect(within.rendered).toMatch(/\[more: offset=50\]\n$/);
  });

  it("lines: a from_end limit above max_window_lines is clipped too", async () => {
    const w = await read("res_log", {
      window: { case: "lines", value: { limit: 80, fromEnd: true } },
    });
    expect(w.trailer?.returnedLines).toBe(50n);
    expect(w.trailer?.clipped).toBe(true);
    expect(w.rendered).toMatch(
      /\[window capped at 50 lines; earlier lines: offset=50 from_end=true\]\n$/,
    );
    const within = await read("res_log", {
      window: { case: "lines", value: { limit: 50, fromEnd: true } },
    });
    expect(within.trailer?.clipped).toBe(false);
  });

  it("lines: max_window_chars and max_line_chars clip", async () => {
    const text = Array.from({ length: 60 }, () => "w".repeat(99)).join("\n");
    await t.sdk().offload({ tenant: "dev", runId: "c", callId: "dense" }, text);
    const dense = await read("res_dense", { window: { case: "lines", value: { limit: 50 } } });
    expect(dense.trailer?.clipped).toBe(true);
    expect(dense.rendered).toContain("window clipped at 5000 chars");
    const wide = await read("res_wide", { window: { case: "lines", value: {} } });
    expect(wide.trailer?.clipped).toBe(true);
    expect(wide.rendered).toContain("line clipped at 100 chars");
  });

  it("bytes: a limit above max_bytes_window, or none on a larger payload, is clipped", async () => {
    const asked = await read("res_log", { window: { case: "bytes", value: { limit: 5000n } } });
    expect(asked.trailer?.returnedBytes).toBe(1000n);
    expect(asked.trailer?.clipped).toBe(true);
    expect(asked.rendered).toMatch(/\[window capped at 1000 bytes; more: bytes offset=1000\]\n$/);
    const unset = await read("res_log", { window: { case: "bytes", value: {} } });
    expect(unset.trailer?.returnedBytes).toBe(1000n);
    expect(unset.trailer?.clipped).toBe(true);
    const within = await read("res_log", { window: { case: "bytes", value: { limit: 100n } } });
    expect(within.trailer?.clipped).toBe(false);
    expect(within.rendered).toMatch(/\[more: bytes offset=100\]\n$/);
  });

  it("search: max_matches above the cap is clipped and says the window was capped", async () => {
    const w = await read("res_log", {
      window: { case: "search", value: { pattern: "NEEDLE", maxMatches: 20 } },
    });
    expect(w.trailer?.returnedMatches).toBe(10n);
    expect(w.trailer?.nextOffset).toBe(10n);
    expect(w.trailer?.clipped).toBe(true);
    expect(w.rendered).toMatch(/\[window capped at 10 matches; more matches: skip=10\]\n$/);
    const within = await read("res_log", {
      window: { case: "search", value: { pattern: "NEEDLE", maxMatches: 10 } },
    });
    expect(within.trailer?.clipped).toBe(false);
    expect(within.rendered).toMatch(/\[more matches: skip=10\]\n$/);
    const unset = await read("res_log", {
      window: { case: "search", value: { pattern: "NEEDLE" } },
    });
    expect(unset.trailer?.returnedMatches).toBe(10n);
    expect(unset.trailer?.clipped).toBe(false);
    // Asking above the cap on the last page cuts nothing.
    const last = await read("res_log", {
      window: { case: "search", value: { pattern: "NEEDLE", maxMatches: 20, skip: 40n } },
    });
    expect(last.trailer?.returnedMatches).toBe(2n);
    expect(last.trailer?.clipped).toBe(false);
  });

  it("search: a clipped match line or context line is clipped", async () => {
    const match = await read("res_wide", {
      window: { case: "search", value: { pattern: "NEEDLE" } },
    });
    expect(match.trailer?.clipped).toBe(true);
    expect(match.rendered).toContain("line clipped at 100 chars");
    const context = await read("res_ctx", {
      window: { case: "search", value: { pattern: "NEEDLE", contextLines: 1 } },
    });
    expect(context.trailer?.clipped).toBe(true);
    expect(context.rendered).toContain("line clipped at 100 chars");
    const plain = await read("res_ctx", {
      window: { case: "search", value: { pattern: "NEEDLE" } },
    });
    expect(plain.trailer?.clipped).toBe(false);
  });

  it("search: max_window_chars cutting matches or their context is clipped", async () => {
    const w = await read("res_log", {
      window: { case: "search", value: { pattern: "entry", maxMatches: 10, contextLines: 20 } },
    });
    expect(w.trailer?.clipped).toBe(false);
    const text = Array.from(
      { length: 200 },
      (_, i) => `${"v".repeat(90)}${i % 30 === 29 ? " hit" : ""}`,
    ).join("\n");
    await t.sdk().offload({ tenant: "dev", runId: "c", callId: "hits" }, text);
    const cut = await read("res_hits", {
      window: { case: "search", value: { pattern: "hit", contextLines: 20 } },
    });
    expect(cut.trailer?.clipped).toBe(true);
    expect(cut.rendered).toContain("window clipped at 5000 chars");
  });

  it("search: a line longer than the search line cap, matched on its head only, is clipped", async () => {
    const w = await read("res_deep", { window: { case: "search", value: { pattern: "NEEDLE" } } });
    expect(w.trailer?.totalMatches).toBe(1n);
    expect(w.trailer?.clipped).toBe(true);
  });
});
