import { chmodSync, existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "./support/run-cli.js";
import { scratchDir } from "./support/scratch-dir.js";

describe("spillway serve flag values", () => {
  it("refuses a bad value of any flag before it listens, naming the flag", async () => {
    const dataDir = scratchDir("cli-flags");
    // Flags that were read only after the server had started listening and sweeping.
    for (const flag of ["drain-delay-ms", "grace-ms", "sweep-interval-ms", "orphan-age-ms"]) {
      const run = await runCli(["serve", "--port", "0", "--data-dir", dataDir, `--${flag}`, "x"]);
      expect(run.stderr, flag).toContain(`--${flag}`);
      expect(run.stdout, flag).not.toContain("listening");
      expect(run.code, flag).toBe(1);
    }
  });

  it("refuses an empty value instead of reading it as 0", async () => {
    const dataDir = scratchDir("cli-flags");
    // Number("") is 0: an empty SPILLWAY_MAX_INFLIGHT_BYTES turned the limit off, an empty
    // SPILLWAY_DRAIN_DELAY_MS the drain delay, an empty --port picked a random port.
    for (const [flag, env] of [
      ["max-inflight-bytes", "SPILLWAY_MAX_INFLIGHT_BYTES"],
      ["drain-delay-ms", "SPILLWAY_DRAIN_DELAY_MS"],
      ["idle-stream-ms", "SPILLWAY_IDLE_STREAM_MS"],
    ] as const) {
      const run = await runCli(["serve", "--port", "0", "--data-dir", dataDir], { [env]: " " });
      expect(run.stderr, env).toContain(`--${flag} (${env})`);
      expect(run.stdout, env).not.toContain("listening");
      expect(run.code, env).toBe(1);
    }
    const run = await runCli(["serve", "--port", "", "--data-dir", dataDir]);
    expect(run.stderr).toContain("--port");
    expect(run.code).toBe(1);
    const tooHigh = await runCli(["serve", "--port", "99999", "--data-dir", dataDir]);
    expect(tooHigh.stderr).toContain("--port: must be at most 65535");
    expect(tooHigh.code).toBe(1);
  });

  it.each([
    {
      what: "a keepalive timeout of 0, which no PING can meet",
      args: [],
      env: { SPILLWAY_KEEPALIVE_TIMEOUT_MS: "0" },
      message: "--keepalive-timeout-ms (SPILLWAY_KEEPALIVE_TIMEOUT_MS)",
    },
    {
      what: "--max-calls-per-tenant 0, which refused every call of every tenant",
      args: ["--max-calls-per-tenant", "0"],
      env: {},
      message: "--max-calls-per-tenant: must be at least 1",
    },
    {
      what: "a sweep interval of 0, which swept without pause",
      args: ["--sweep-interval-ms", "0"],
      env: {},
      message: "--sweep-interval-ms",
    },
    {
      what: "a timer's duration past 2^31 - 1 ms, which Node fired after 1 ms, every time",
      args: ["--sweep-interval-ms", "30d"],
      env: {},
      message:
        '--sweep-interval-ms: must be at most 2147483647 ms (24.8 days, the longest a timer waits), got "30d"',
    },
    {
      what: "a request deadline past 2^31 - 1 ms, which failed every call at once",
      args: [],
      env: { SPILLWAY_REQUEST_DEADLINE_MS: "25d" },
      message:
        "--request-deadline-ms (SPILLWAY_REQUEST_DEADLINE_MS): must be at most 2147483647 ms",
    },
    {
      what: "--max-blob-bytes 0, which refused every offload",
      args: ["--max-blob-bytes", "0"],
      env: {},
      message: '--max-blob-bytes: must be at least 1, got "0"',
    },
    {
      what: "--max-run-bytes 0, which refused every offload",
      args: ["--max-run-bytes", "0"],
      env: {},
      message: '--max-run-bytes: must be at least 1, got "0"',
    },
    {
      what: "a bytes-in-flight limit below one call, by its variable",
      args: [],
      env: { SPILLWAY_MAX_INFLIGHT_BYTES: "100" },
      message:
        "--max-inflight-bytes (SPILLWAY_MAX_INFLIGHT_BYTES): 100 is below the 4210688 bytes one call reserves",
    },
    {
      what: "an inline size that makes one call heavier than the default limit, naming it",
      args: [],
      env: { SPILLWAY_INLINE_BYTES: "1GiB" },
      message: "--inline-bytes (SPILLWAY_INLINE_BYTES): the 1077936128 bytes one call reserves",
    },
    {
      what: "window caps the server would refuse, by their flags",
      args: ["--max-window-chars", "2000"],
      env: {},
      message: "window cap --max-window-chars (2000) must exceed --max-line-chars",
    },
    {
      what: "a window cap whose text would not fit a 4 MiB reply",
      args: ["--max-window-chars", "1000001"],
      env: {},
      message: "window cap --max-window-chars (1000001) must be at most 1000000",
    },
    {
      what: "a switch variable that is not 1, true, 0 or false, naming its flag",
      args: [],
      env: { SPILLWAY_INSPECTOR: "yes" },
      message: '--inspector (SPILLWAY_INSPECTOR): expected 1, true, 0 or false, got "yes"',
    },
    {
      what: "an object store's flag beside the filesystem backend, which served ./data instead",
      args: ["--s3-bucket", "prod"],
      env: {},
      message:
        "--s3-bucket does not apply to --backend filesystem (the default): it is the s3 and minio backends'",
    },
    {
      what: "a public address without a token file, once and not by each worker",
      args: ["--host", "0.0.0.0"],
      env: {},
      message: "--host: refusing to listen on 0.0.0.0 without a token file",
    },
  ])("refuses $what", async ({ args, env, message }) => {
    const dataDir = scratchDir("cli-flags");
    const run = await runCli(
      ["serve", "--port", "0", "--data-dir", dataDir, "--workers", "2", ...args],
      env,
    );
    // Once, by the first process, before any worker starts.
    expect(run.stderr.split(message)).toHaveLength(2);
    expect(run.stdout).not.toContain("starting workers");
    expect(run.stdout).not.toContain("listening");
    expect(run.code).toBe(1);
  });
});

describe("spillway sweep and serve data directory", () => {
  it("makes no data directory for a serve refused over any flag", async () => {
    const parent = scratchDir("cli-flags");
    for (const args of [
      ["--max-blob-bytes", "0"],
      ["--max-inflight-bytes", "100"],
      ["--host", "0.0.0.0"],
      ["--keepalive-timeout-ms", "0"],
    ]) {
      const dataDir = join(parent, args.join("_"));
      const run = await runCli(["serve", "--port", "0", "--data-dir", dataDir, ...args]);
      expect(run.code, args.join(" ")).toBe(1);
      expect(existsSync(dataDir), args.join(" ")).toBe(false);
    }
  });

  it("sweep refuses the memory backend, which only a serve process holds", async () => {
    const run = await runCli(["sweep", "--backend", "memory"]);
    expect(run.stderr).toContain(
      "--backend memory: the memory backend lives inside one serve process",
    );
    expect(run.stdout).toBe("");
    expect(run.code).toBe(1);
  });

  it("sweep takes an orphan age past 2^31 - 1 ms: it is an age, not a timer", async () => {
    const run = await runCli([
      "sweep",
      "--data-dir",
      scratchDir("cli-flags"),
      "--orphan-age-ms",
      "30d",
    ]);
    expect(run.stderr).toBe("");
    expect(JSON.parse(run.stdout)).toMatchObject({ orphanBlobs: 0, refused: 0 });
    expect(run.code).toBe(0);
  });

  it("sweep refuses a data directory that does not exist, and creates nothing", async () => {
    // A typo in a cron job's --data-dir reported an empty sweep, exit 0, and made the directory.
    const missing = join(scratchDir("cli-flags"), "no-such-dir");
    const run = await runCli(["sweep", "--data-dir", missing]);
    expect(run.stderr).toContain(`--data-dir: ${missing}: does not exist`);
    expect(run.stdout).toBe("");
    expect(run.code).toBe(1);
    expect(existsSync(missing)).toBe(false);
  });

  it("refuses an empty data directory, which meant the working directory", async () => {
    // resolve("") is the working directory, which the backend then chmods to 0700 and uses.
    const cwd = scratchDir("cli-flags");
    chmodSync(cwd, 0o755);
    for (const args of [["sweep"], ["serve", "--port", "0"]]) {
      const run = await runCli(args, { SPILLWAY_DATA_DIR: "" }, cwd);
      expect(run.stderr, args[0]).toContain("--data-dir (SPILLWAY_DATA_DIR): empty");
      expect(run.stdout, args[0]).not.toContain("listening");
      expect(run.code, args[0]).toBe(1);
    }
    expect(statSync(cwd).mode & 0o777).not.toBe(0o700);
  });
});

describe("spillway --version, --help and usage errors", () => {
  const { version } = JSON.parse(
    readFileSync(new URL("../server/package.json", import.meta.url), "utf8"),
  ) as { version: string };

  it("prints the package's version and exits 0", async () => {
    const run = await runCli(["--version"]);
    expect(run).toEqual({ code: 0, stdout: `spillway ${version}\n`, stderr: "" });
  });

  it.each([
    { args: ["--help"] },
    { args: ["-h"] },
    { args: ["help"] },
    { args: ["serve", "--help"] },
    { args: ["sweep", "-h"] },
  ])("prints the help for $args on stdout and exits 0", async ({ args }) => {
    const run = await runCli(args);
    expect(run.stdout).toMatch(new RegExp(`^spillway ${version}\n\nUsage: spillway serve`));
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
  });

  it.each([
    { args: [], problem: "no command" },
    { args: ["bogus"], problem: 'unknown command "bogus"' },
  ])("says $problem on stderr with the usage lines, and exits 2", async ({ args, problem }) => {
    const run = await runCli(args);
    const help = (await runCli(["--help"])).stdout;
    const synopsis = help.slice(
      help.indexOf("Usage:"),
      help.indexOf("\n\n", help.indexOf("Usage:")),
    );
    // The problem, the usage lines and where the rest is: not every flag's description, which
    // scrolled the problem out of sight.
    expect(run.stderr).toBe(
      `spillway: ${problem}\n\n${synopsis}\n\nRun \`spillway --help\` for every command and flag.\n`,
    );
    expect(synopsis.split("\n")).toHaveLength(6);
    expect(run.stdout).toBe("");
    expect(run.code).toBe(2);
  });

  it("runs `spillway mcp` and `spillway mcp-proxy` as the @spillway/mcp executables", async () => {
    const mcp = await runCli(["mcp", "--help"]);
    expect(mcp.stdout).toMatch(/^Usage: spillway-mcp \[flags\]\n/);
    expect(mcp.code).toBe(0);
    const proxy = await runCli(["mcp-proxy", "--port", "1"]);
    expect(proxy.stderr).toMatch(/^spillway-mcp-proxy: /);
    expect(proxy.stderr).toContain("Usage: spillway-mcp-proxy [flags] -- <command> [args...]");
    expect(proxy.code).toBe(2);
  });
});
