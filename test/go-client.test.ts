import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const goModule = fileURLToPath(new URL("../clients/go/", import.meta.url));
const vectorsFile = new URL("../conformance/window-vectors.json", import.meta.url);

/** The output of one `go test` run: its exit code and everything it printed. */
interface GoTestRun {
  readonly code: number;
  readonly output: string;
  readonly seconds: number;
}

/** goTest runs `go test -count=1 -v ./...` in clients/go against the server at url. */
async function goTest(url: string): Promise<GoTestRun> {
  const started = performance.now();
  try {
    const { stdout, stderr } = await promisify(execFile)(
      "go",
      ["test", "-count=1", "-v", "./..."],
      {
        cwd: goModule,
        env: { ...process.env, SPILLWAY_URL: url },
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    return { code: 0, output: stdout + stderr, seconds: (performance.now() - started) / 1000 };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string; message: string };
    // A missing Go toolchain (ENOENT) is a failure like any other, never a skip.
    const output = `${e.stdout ?? ""}${e.stderr ?? ""}` || e.message;
    const code = typeof e.code === "number" ? e.code : -1;
    return { code, output, seconds: (performance.now() - started) / 1000 };
  }
}

/**
 * The Go client (clients/go) passes its own `go test` suite against the compiled `spillway
 * serve`: offload from an io.Reader, windows, stat, list, status codes, the read_tool_output
 * executor, and every window vector rendered byte for byte.
 */
describe("Go client: go test against spillway serve", () => {
  let server: SpillwayProcess | undefined;
  let run: GoTestRun;

  beforeAll(async () => {
    server = await spawnSpillway(["--backend", "memory"]);
    run = await goTest(server.url);
  }, 600_000);

  afterAll(async () => {
    await server?.stop();
  });

  it("passes every Go test", () => {
    console.log(`go test ./... in clients/go: exit ${run.code} in ${run.seconds.toFixed(1)} s`);
    if (run.code !== 0) console.log(run.output);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/^ok\s+github\.com\/spillway-dev\/spillway\/clients\/go\s/m);
    expect(run.output).not.toMatch(/^\s*--- (FAIL|SKIP)/m);
  });

  it("renders every window vector byte for byte in Go", async () => {
    const { vectors } = JSON.parse(await readFile(vectorsFile, "utf8")) as { vectors: unknown[] };
    const line = /^go window vectors: (\d+) of (\d+) rendered byte for byte$/m.exec(run.output);
    console.log(line?.[0] ?? "go window vectors: no result line");
    expect(line?.slice(1).map(Number)).toEqual([vectors.length, vectors.length]);
    expect(run.output).toMatch(/^--- PASS: TestWindowVectors /m);
  });
});
