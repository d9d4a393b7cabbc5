import { readdirSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Window } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countingReads } from "./support/counting-reads.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * A search of a large payload on the filesystem backend: threads find the blocks holding the
 * pattern's text, and the server reads only the lines around them. Over the wire the window is
 * the one a full read gives (every match, its line number and its context, total_matches),
 * while the backend serves a small part of the payload's bytes.
 */
describe("search of a large payload through the blocks that hold its text", () => {
  let t: TestServer;
  let bytesRead = 0;
  const lineCount = 520_000;
  const needleEvery = 50_000;
  const colouredEvery = 150_001;
  const foldedEvery = 130_003;
  const lineText = (k: number): string => {
    if (k % needleEvery === 7) return `${k} WARN svc=auth user=u${k} session token expired`;
    // Coloured: its visible text matches, its stored bytes do not.
    if (k % colouredEvery === 11) return `${k} WARN \u001b[31msession\u001b[0m token expired`;
    // Matches only ignoring case, as RE2 folds it: U+017F is a long s.
    if (k % foldedEvery === 13) return `${k} WARN \u017fESSION TOKEN Expired`;
    return `${k} INFO svc=api user=u${k % 977} msg="request served" latency_ms=${k % 1000} ok`;
  };
  const text = `${Array.from({ length: lineCount }, (_, k) => lineText(k)).join("\n")}\n`;
  const payloadBytes = Buffer.byteLength(text);
  const plain = Array.from({ length: lineCount }, (_, k) => k).filter((k) => k % needleEvery === 7);
  const coloured = Array.from({ length: lineCount }, (_, k) => k).filter(
    (k) => k % colouredEvery === 11,
  );
  const folded = Array.from({ length: lineCount }, (_, k) => k).filter(
    (k) => k % foldedEvery === 13,
  );
  const search = (value: Record<string, unknown>, keepAnsi = false): Promise<Window> =>
    t.sdk().readToolOutput({
      runId: "b",
      handle: "res_big",
      keepAnsi,
      window: { case: "search", value: { pattern: "session token expired", ...value } },
    });
  /** The 0-based numbers of the lines a search window returned as matches. */
  const matched = (w: Window): number[] =>
    w.frames.flatMap((f) =>
      f.frame.case === "content" && f.frame.value.body.case === "matches"
        ? f.frame.value.body.value.matches.map((m) => Number(m.line?.number) - 1)
        : [],
    );

  beforeAll(async () => {
    t = await startTestServer({
      backend: "filesystem",
      wrapBackend: countingReads((n) => {
        bytesRead += n;
      }),
    });
    await t.sdk().offload({ tenant: "dev", runId: "b", callId: "big" }, text, {
      contentType: "text/plain",
    });
  });
  afterAll(() => t.stop());

  it("is large enough to search by blocks", () => {
    expect(payloadBytes).toBeGreaterThan(32 * 1024 * 1024);
  });

  it("returns every match with its number and context, reading a small part of the bytes", async () => {
    bytesRead = 0;
    const w = await search({ contextLines: 1, maxMatches: 100 });
    const all = [...plain, ...coloured].sort((a, b) => a - b);
    expect(w.trailer?.totalMatches).toBe(BigInt(all.length));
    expect(matched(w)).toEqual(all);
    for (const k of all) {
      expect(w.rendered).toContain(`${k}-\t${lineText(k - 1)}\n`);
      expect(w.rendered).toContain(`${k + 1}:\t`);
      expect(w.rendered).toContain(`${k + 2}-\t${lineText(k + 1)}\n`);
    }
    const first = coloured[0] ?? 0;
    expect(w.rendered).toContain(`${first + 1}:\t${first} WARN session token expired\n`);
    expect(bytesRead).toBeLessThan(payloadBytes / 4);
  });

  it("keeps escape sequences when asked, and finds by an expression's plain text", async () => {
    const kept = await search({}, true);
    expect(kept.trailer?.totalMatches).toBe(BigInt(plain.length));
    bytesRead = 0;
    const regex = await search({
      pattern: "user=u[0-9]+ session token (expired|revoked)",
      regex: true,
    });
    expect(regex.trailer?.totalMatches).toBe(BigInt(plain.length));
    expect(bytesRead).toBeLessThan(payloadBytes / 4);
    // Its longest plain text is in nearly every block; the threads test the lines holding it.
    const pattern = 'user=u(12|13) msg="request served" latency_ms=99[0-9] ok';
    const expected = Array.from({ length: lineCount }, (_, k) => lineText(k)).filter((line) =>
      new RegExp(pattern).test(line),
    );
    expect(expected.length).toBeGreaterThan(0);
    bytesRead = 0;
    const rare = await search({ pattern, regex: true });
    expect(rare.trailer?.totalMatches).toBe(BigInt(expected.length));
    expect(rare.rendered).toContain(`\t${expected[0]}\n`);
    expect(bytesRead).toBeLessThan(payloadBytes / 4);
  });

  it("runs an expression that names no plain text over the lines, on its threads", async () => {
    // A six-digit line number, a level, and anything but `s` after: the lines whose visible
    // text has ſ there (U+017F is two bytes, neither `s`).
    const pattern = "[0-9]{6} [A-Z]{4} [^s]";
    const visible = (line: string) => line.replaceAll("\u001b[31m", "").replaceAll("\u001b[0m", "");
    const expected = Array.from({ length: lineCount }, (_, k) => k).filter((k) =>
      new RegExp(pattern, "u").test(visible(lineText(k))),
    );
    expect(expected).toEqual(folded.filter((k) => k >= 100_000));
    bytesRead = 0;
    const w = await search({ pattern, regex: true });
    expect(w.trailer?.totalMatches).toBe(BigInt(expected.length));
    expect(matched(w)).toEqual(expected);
    expect(bytesRead).toBeLessThan(payloadBytes / 4);
  });

  it("runs an expression ending at the line's end over the lines, \\n or \\r\\n", async () => {
    // Seven lowercase letters ending the line: `expired`, plain or coloured.
    const pattern = "[a-z]{7}$";
    const expected = [...plain, ...coloured].sort((a, b) => a - b);
    bytesRead = 0;
    const w = await search({ pattern, regex: true });
    expect(w.trailer?.totalMatches).toBe(BigInt(expected.length));
    expect(matched(w)).toEqual(expected);
    expect(bytesRead).toBeLessThan(payloadBytes / 4);

    const crlf = `${Array.from({ length: lineCount }, (_, k) => lineText(k)).join("\r\n")}\r\n`;
    await t.sdk().offload({ tenant: "dev", runId: "crlf", callId: "crlf" }, crlf, {
      contentType: "text/plain",
    });
    bytesRead = 0;
    const c = await t.sdk().readToolOutput({
      runId: "crlf",
      handle: "res_crlf",
      window: { case: "search", value: { pattern, regex: true } },
    });
    expect(c.trailer?.totalMatches).toBe(BigInt(expected.length));
    expect(matched(c)).toEqual(expected);
    expect(bytesRead).toBeLessThan(Buffer.byteLength(crlf) / 4);
  });

  it("ignores case on its threads too, folding characters as RE2 does", async () => {
    const all = [...plain, ...coloured, ...folded].sort((a, b) => a - b);
    for (const value of [
      { pattern: "Session Token EXPIRED" },
      { pattern: "SESSION token (expired|revoked)$", regex: true },
      { pattern: "QUOTA exhausted|Session Token EXPIRED", regex: true },
    ]) {
      bytesRead = 0;
      const w = await search({ ...value, ignoreCase: true, maxMatches: 100 });
      expect(w.trailer?.totalMatches).toBe(BigInt(all.length));
      expect(matched(w)).toEqual(all);
      expect(bytesRead).toBeLessThan(payloadBytes / 4);
    }
  });

  it("finds an alternation's lines through the blocks holding any alternative", async () => {
    bytesRead = 0;
    const w = await search({ pattern: "quota exhausted|session token expired", regex: true });
    expect(w.trailer?.totalMatches).toBe(BigInt(plain.length + coloured.length));
    expect(bytesRead).toBeLessThan(payloadBytes / 4);
  });

  it("reads on as usual for a text on every line, and stops at the asked matches", async () => {
    bytesRead = 0;
    const w = await search({ pattern: "INFO svc=api", maxMatches: 3 });
    expect(matched(w)).toEqual([0, 1, 2]);
    expect(bytesRead).toBeLessThan(payloadBytes / 4);
    const slow = Array.from({ length: lineCount }, (_, k) => lineText(k)).filter((line) =>
      line.includes("latency_ms=999 ok"),
    );
    const counted = await search({ pattern: "latency_ms=999 ok", maxMatches: 1 });
    expect(counted.trailer?.totalMatches).toBeUndefined();
    const last = await search({ pattern: "latency_ms=999 ok", skip: BigInt(slow.length - 1) });
    expect(last.trailer?.totalMatches).toBe(BigInt(slow.length));
  });

  it("reports a stored file cut short as DATA_LOSS, as a search reading every byte does", async () => {
    /** The stored file of exactly `size` bytes: the payload searched here. */
    const sized = (dir: string, size: number): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) return sized(path, size);
        return statSync(path).size === size ? [path] : [];
      });
    const [blob] = sized(t.dataDir, payloadBytes);
    truncateSync(blob ?? "", Math.floor(payloadBytes / 2));
    const failed = await search({}).then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(failed?.code).toBe(Code.DataLoss);
  });
});
