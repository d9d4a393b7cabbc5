import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  startTestServer,
  type TestBackendKind,
  type TestServer,
} from "../../test/support/test-server.js";
import { type ConformanceCase, loadCases } from "./case.js";
import { loadKnownFailing, parseActor, parseCliArgs, runCli } from "./cli.js";
import { formatSummary } from "./report.js";
import { type Actor, runConformance } from "./runner.js";
import { loadWindowVectors, vectorCases } from "./window-vectors.js";

const casesDir = new URL("../cases/", import.meta.url).pathname;
const vectorsFile = new URL("../window-vectors.json", import.meta.url).pathname;
const tokens = { "conformance-token-a": "tenant-a", "conformance-token-b": "tenant-b" };
const actors: Actor[] = [
  { name: "A", token: "conformance-token-a", tenant: "tenant-a" },
  { name: "B", token: "conformance-token-b", tenant: "tenant-b" },
];

/**
 * Known failures per backend, as data the CLI also reads (`--known-failing`). The s3 list is
 * empty now (long handles once overflowed S3's key limit); a listed case that starts passing
 * fails the run, so the lists only ever shrink by an explicit edit.
 */
const knownFailingFiles: Partial<Record<TestBackendKind, string>> = {
  "s3-minio": new URL("../known-failing/s3.json", import.meta.url).pathname,
};

describe.each<TestBackendKind>(["memory", "filesystem", "s3-minio"])(
  "the conformance suite passes  (%s)",
  (backend) => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({ backend, tokens });
    });
    afterAll(() => t.stop());

    it("passes every case and every window vector, skipping none", async () => {
      const knownFile = knownFailingFiles[backend];
      const knownFailing = knownFile === undefined ? [] : await loadKnownFailing(knownFile);
      const vectors = await loadWindowVectors(vectorsFile);
      const cases = [...(await loadCases(casesDir)), ...vectorCases(vectors)];
      expect(cases.length).toBeGreaterThanOrEqual(60);
      const report = await runConformance({
        target: t.url,
        cases,
        actors,
        vectorCaps: vectors.caps,
        knownFailing,
        concurrency: 8,
      });
      const failures = report.results.filter((r) => r.status === "fail" || r.status === "skip");
      expect(failures).toEqual([]);
      expect(report.passed).toBe(cases.length - knownFailing.length);
      expect(report.knownFailing).toBe(knownFailing.length);
      expect(formatSummary(report)).toMatch(/^\d+ passed, 0 failed, 0 skipped/);
    });
  },
);

describe("the conformance harness", () => {
  let t: TestServer;
  let dir: string;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory" });
    dir = await mkdtemp(join(tmpdir(), "spillway-conformance-"));
  });
  afterAll(async () => {
    await t.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const good: ConformanceCase = {
    name: "demo/good",
    steps: [
      { offload: { run: "r", call: "c", data: { text: "one\ntwo\n" } } },
      { read: { run: "r", handle: "res_c" }, expect: { lineTexts: ["one", "two"] } },
    ],
  };
  const wrong: ConformanceCase = {
    name: "demo/wrong-expectation",
    steps: [
      { offload: { run: "r", call: "c", data: { text: "one\ntwo\n" } } },
      { read: { run: "r", handle: "res_c" }, expect: { lineTexts: ["one", "three"] } },
    ],
  };
  const wrongCode: ConformanceCase = {
    name: "demo/wrong-code",
    steps: [{ read: { run: "r", handle: "res_missing" }, expect: { code: "OK" } }],
  };
  const needsFeature: ConformanceCase = {
    name: "demo/needs-feature",
    features: ["teleport"],
    steps: [{ serverInfo: {} }],
  };

  it("reports a case whose expectation is wrong as FAIL with the reason", async () => {
    const report = await runConformance({ target: t.url, cases: [good, wrong, wrongCode] });
    expect(report.passed).toBe(1);
    expect(report.failed).toBe(2);
    expect(report.results[1]).toMatchObject({ status: "fail", name: "demo/wrong-expectation" });
    expect(report.results[1]?.detail).toContain("lineTexts[1]");
    expect(report.results[2]?.detail).toContain("expected OK, got PERMISSION_DENIED");
  });

  it("fails the run when a known-failing case passes, and counts a failing one apart", async () => {
    const report = await runConformance({
      target: t.url,
      cases: [good, wrong],
      knownFailing: ["demo/good", "demo/wrong-expectation"],
    });
    expect(report.results).toEqual([
      {
        name: "demo/good",
        status: "fail",
        detail: "now passes; remove it from the known-failing list",
      },
      expect.objectContaining({ name: "demo/wrong-expectation", status: "xfail" }),
    ]);
    expect(report).toMatchObject({ passed: 0, failed: 1, knownFailing: 1 });
  });

  it("selects cases with run and skip patterns", async () => {
    const report = await runConformance({
      target: t.url,
      cases: [good, wrong, wrongCode],
      run: /^demo\/(good|wrong)/,
      skip: /code$/,
    });
    expect(report.results.map((r) => r.name)).toEqual(["demo/good", "demo/wrong-expectation"]);
  });

  it("skips a case whose feature is not declared, never counting it as passed", async () => {
    const report = await runConformance({ target: t.url, cases: [good, needsFeature] });
    expect(report.results[1]).toEqual({
      name: "demo/needs-feature",
      status: "skip",
      detail: "feature teleport not declared",
    });
    expect(report).toMatchObject({ passed: 1, skipped: 1, failed: 0 });
    const declared = await runConformance({
      target: t.url,
      cases: [needsFeature],
      features: ["teleport"],
    });
    expect(declared.passed).toBe(1);
  });

  it("skips the tenant cases against a dev-mode server with one tenant", async () => {
    const report = await runConformance({
      target: t.url,
      cases: await loadCases(casesDir),
      run: /^(tenants|auth)\//,
    });
    expect(report.results.length).toBeGreaterThan(5);
    expect(report.results.every((r) => r.status === "skip")).toBe(true);
    expect(report.results[0]?.detail).toMatch(/feature (multi-tenant|auth) not declared/);
  });

  it("runs from the command line: one line per case, the summary, the exit code", async () => {
    const casesPath = join(dir, "cases");
    await mkdir(casesPath, { recursive: true });
    await writeFile(join(casesPath, "demo.json"), JSON.stringify([good, wrong, needsFeature]));
    const knownFile = join(dir, "known.json");
    await writeFile(knownFile, JSON.stringify(["demo/wrong-expectation"]));
    const lines: string[] = [];
    const args = ["--target", t.url, "--cases", casesPath, "--vectors", vectorsFile];
    const code = await runCli([...args, "--known-failing", knownFile, "--run", "^demo/"], (l) =>
      lines.push(l),
    );
    expect(lines).toEqual([
      "PASS demo/good",
      "XFAIL demo/wrong-expectation",
      "SKIP demo/needs-feature (feature teleport not declared)",
      "1 passed, 0 failed, 1 skipped, 1 known failing",
    ]);
    expect(code).toBe(0);

    lines.length = 0;
    expect(await runCli([...args, "--run", "^demo/"], (l) => lines.push(l))).toBe(1);
    expect(lines[1]).toMatch(/^FAIL demo\/wrong-expectation: step 2: lineTexts\[1\]/);
    expect(lines.at(-1)).toBe("1 passed, 1 failed, 1 skipped");

    lines.length = 0;
    expect(await runCli(["--run", "x"], (l) => lines.push(l))).toBe(2);
    expect(lines[0]).toContain("--target is required");
  });

  it("parses actors and features from the command line", () => {
    expect(parseActor("A=tok:en:tenant-a")).toEqual({
      name: "A",
      token: "tok:en",
      tenant: "tenant-a",
    });
    expect(() => parseActor("A=token")).toThrow(/NAME=TOKEN:TENANT/);
    const opts = parseCliArgs([
      "--target",
      "http://127.0.0.1:1",
      "--token",
      "A=ta:tenant-a",
      "--token",
      "B=tb:tenant-b",
      "--features",
      "lines, search",
    ]);
    expect(opts.actors.map((a) => a.tenant)).toEqual(["tenant-a", "tenant-b"]);
    expect(opts.features).toEqual(["lines", "search"]);
    expect(parseCliArgs(["--target", "http://x"]).actors).toEqual([{ name: "A", tenant: "dev" }]);
    expect(() => parseCliArgs(["--target", "http://x", "--token", "B=tb:tenant-b"])).toThrow(
      /actor A/,
    );
  });
});
