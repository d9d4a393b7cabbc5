import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { createSpillwayClient } from "@spillway/client";
import { describe, expect, it } from "vitest";
import { hashToken } from "../server/src/auth.js";
import { runCli } from "./support/run-cli.js";
import { scratchDir } from "./support/scratch-dir.js";
import { writeSelfSigned } from "./support/self-signed.js";
import { spawnSpillway } from "./support/spawn-spillway.js";
import { waitFor } from "./support/wait-for.js";

/** Expects a run that refused to start: exit 1, `message` on stderr, nothing listened. */
function expectRefused(
  run: { code: number | null; stdout: string; stderr: string },
  message: string,
): void {
  expect(run.stderr).toContain(message);
  expect(run.stdout).not.toContain("listening");
  expect(run.code).toBe(1);
}

describe("size and duration units in flags, variables and the token file", () => {
  it("reads IEC and SI sizes and durations with units into the limits the server applies", async () => {
    const dir = scratchDir("cli-units");
    const tokenFile = join(dir, "tokens");
    writeFileSync(
      tokenFile,
      `${hashToken("small")} small max_blob_bytes=1MiB max_run_bytes=2MB max_inflight_bytes=64MiB\n${hashToken("big")} big\n`,
    );
    const server = await spawnSpillway(
      [
        "--backend",
        "memory",
        "--token-file",
        tokenFile,
        "--max-blob-bytes",
        "10GiB",
        "--max-run-bytes",
        "20GB",
        "--inline-bytes",
        "8KiB",
        "--max-inflight-bytes",
        "1.5GiB",
        "--connection-idle-ms",
        "5m",
        "--keepalive-ms",
        "1.5m",
        "--request-deadline-ms",
        "2s",
      ],
      { SPILLWAY_MAX_INFLIGHT_BYTES_PER_TENANT: "512MiB", SPILLWAY_IDLE_STREAM_MS: "30s" },
    );
    try {
      const info = (token: string) =>
        createSpillwayClient({ baseUrl: server.url, token }).raw.getServerInfo({});
      const big = (await info("big")).limits;
      expect(big?.maxBlobBytes).toBe(10n * 1024n ** 3n);
      expect(big?.maxRunBytes).toBe(20_000_000_000n);
      expect(big?.inlineBytes).toBe(8192n);
      expect(big?.maxInflightBytes).toBe(1536n * 1024n ** 2n);
      expect(big?.maxInflightBytesPerTenant).toBe(512n * 1024n ** 2n);
      expect(big?.offloadIdleTimeout?.seconds).toBe(30n);
      expect(big?.connectionIdleTimeout?.seconds).toBe(300n);
      expect(big?.keepaliveInterval?.seconds).toBe(90n);
      expect(big?.requestDeadline?.seconds).toBe(2n);
      const small = (await info("small")).limits;
      expect(small?.maxBlobBytes).toBe(1024n ** 2n);
      expect(small?.maxRunBytes).toBe(2_000_000n);
      expect(small?.maxInflightBytesPerTenant).toBe(64n * 1024n ** 2n);
    } finally {
      await server.stop();
    }
  });

  it.each([
    { args: ["--max-blob-bytes", "10G"], env: {}, message: '--max-blob-bytes: unknown unit "G"' },
    { args: ["--inline-bytes", "16KB"], env: {}, message: '--inline-bytes: unknown unit "KB"' },
    {
      args: [],
      env: { SPILLWAY_MAX_RUN_BYTES: "9000TiB" },
      message:
        '--max-run-bytes (SPILLWAY_MAX_RUN_BYTES): more than 9007199254740991 bytes, got "9000TiB"',
    },
    {
      args: ["--max-bytes-window", "1.5"],
      env: {},
      message: '--max-bytes-window: not a whole number of bytes, got "1.5"',
    },
    {
      args: [],
      env: { SPILLWAY_MAX_INFLIGHT_BYTES_PER_TENANT: "-1MiB" },
      message:
        "--max-inflight-bytes-per-tenant (SPILLWAY_MAX_INFLIGHT_BYTES_PER_TENANT): expected a whole number of bytes",
    },
    { args: ["--grace-ms", "5min"], env: {}, message: '--grace-ms: unknown unit "min"' },
    {
      args: [],
      env: { SPILLWAY_KEEPALIVE_TIMEOUT_MS: "0s" },
      message:
        '--keepalive-timeout-ms (SPILLWAY_KEEPALIVE_TIMEOUT_MS): must be at least 1, got "0s"',
    },
    {
      args: ["--max-window-lines", "1k"],
      env: {},
      message: "--max-window-lines: expected a whole number",
    },
    {
      args: ["--port", "50999", "--metrics-port", "50999"],
      env: {},
      message:
        "--metrics-port is 50999, the port calls are served on (--port); give metrics a port of their own",
    },
  ])("refuses $args $env naming the flag and the value", async ({ args, env, message }) => {
    const dataDir = scratchDir("cli-units");
    const run = await runCli(["serve", "--port", "0", "--data-dir", dataDir, ...args], env);
    expectRefused(run, message);
  });

  it("refuses a token file whose limit has an ambiguous unit, naming the flag, path and line", async () => {
    const dir = scratchDir("cli-units");
    const tokenFile = join(dir, "tokens");
    writeFileSync(tokenFile, `# tenants\n${hashToken("a")} acme max_blob_bytes=1G\n`);
    const run = await runCli(["serve", "--port", "0", "--backend", "memory"], {
      SPILLWAY_TOKEN_FILE: tokenFile,
    });
    expectRefused(
      run,
      `--token-file (SPILLWAY_TOKEN_FILE): ${tokenFile}: token file line 2: max_blob_bytes=1G: unknown unit "G"`,
    );
  });
});

it("warns of a SPILLWAY_ variable serve does not read, naming the one it likely meant", async () => {
  const server = await spawnSpillway(["--backend", "memory"], {
    SPILLWAY_TOKEN_FIEL: "/etc/spillway/tokens",
    SPILLWAY_TOKEN: "a client's token, read by the SDKs",
    SPILLWAY_CACHE: "/tmp/spillway-cache",
    SPILLWAY_CHROMIUM: "/usr/bin/chromium",
  });
  try {
    const warnings = server
      .output()
      .split("\n")
      .filter((line) => line.includes('"variable"'))
      .map(
        (line) =>
          JSON.parse(line) as { level: number; variable: string; meant?: string; msg: string },
      );
    // Only the misspelt one: SPILLWAY_TOKEN is the SDKs' (whatever else the environment holds).
    expect(warnings.filter((w) => w.variable.startsWith("SPILLWAY_TOKEN"))).toEqual([
      expect.objectContaining({
        level: 40,
        variable: "SPILLWAY_TOKEN_FIEL",
        meant: "SPILLWAY_TOKEN_FILE",
        msg: "SPILLWAY_TOKEN_FIEL is not a variable spillway serve reads, so it is ignored; did you mean SPILLWAY_TOKEN_FILE?",
      }),
    ]);
    // The install scripts' and the browser test's: not serve's, not mistakes either.
    expect(
      warnings.filter((w) => ["SPILLWAY_CACHE", "SPILLWAY_CHROMIUM"].includes(w.variable)),
    ).toEqual([]);
  } finally {
    await server.stop();
  }
});

it("refuses a token file that gives one token to two tenants, naming both lines", async () => {
  const dir = scratchDir("cli-units");
  const tokenFile = join(dir, "tokens");
  writeFileSync(
    tokenFile,
    `${hashToken("a")} acme\n${hashToken("b")} beta\n${hashToken("a")} zeta\n`,
  );
  const run = await runCli(["serve", "--port", "0", "--backend", "memory"], {
    SPILLWAY_TOKEN_FILE: tokenFile,
  });
  expectRefused(
    run,
    `--token-file (SPILLWAY_TOKEN_FILE): ${tokenFile}: token file line 3: the token of line 1 again (tenant "zeta", there "acme"); each token names one tenant`,
  );
});

describe("configuration files and directories that cannot be used", () => {
  const dir = scratchDir("cli-files");
  const cert = { certFile: join(dir, "a.crt"), keyFile: join(dir, "a.key"), commonName: "a" };
  const other = { certFile: join(dir, "b.crt"), keyFile: join(dir, "b.key"), commonName: "b" };
  writeSelfSigned(cert);
  writeSelfSigned(other);
  const plain = join(dir, "plain.txt");
  writeFileSync(plain, "not a pem\n");
  const empty = join(dir, "empty.pem");
  writeFileSync(empty, "");
  const tls = ["--tls-cert", cert.certFile, "--tls-key", cert.keyFile];

  it.each([
    {
      what: "a token file that is a directory",
      args: ["--token-file", dir],
      env: {},
      message: `--token-file: ${dir}: is a directory, not a file`,
    },
    {
      what: "a token file from the environment that does not exist",
      args: [],
      env: { SPILLWAY_TOKEN_FILE: join(dir, "none") },
      message: `--token-file (SPILLWAY_TOKEN_FILE): ${join(dir, "none")}: no such file or directory`,
    },
    {
      what: "a key without its certificate",
      args: [],
      env: { SPILLWAY_TLS_KEY: cert.keyFile },
      message: "--tls-key (SPILLWAY_TLS_KEY) is set but --tls-cert is not; they go together",
    },
    {
      what: "a certificate file without a certificate",
      args: ["--tls-cert", plain, "--tls-key", cert.keyFile],
      env: {},
      message: `--tls-cert: ${plain}: holds no PEM certificate`,
    },
    {
      what: "a key from the environment that does not match the certificate",
      args: ["--tls-cert", cert.certFile],
      env: { SPILLWAY_TLS_KEY: other.keyFile },
      message: `--tls-key (SPILLWAY_TLS_KEY): ${other.keyFile}: does not match the certificate in ${cert.certFile}`,
    },
    {
      what: "a client CA bundle without a certificate and key, which would serve plaintext",
      args: ["--tls-client-ca", cert.certFile],
      env: {},
      message:
        "--tls-client-ca is set but --tls-cert and --tls-key are not; client certificates need TLS",
    },
    {
      what: "an empty client CA bundle, which would refuse every client",
      args: [...tls, "--tls-client-ca", empty],
      env: {},
      message: `--tls-client-ca: ${empty}: holds no PEM certificate, so no client could connect`,
    },
    {
      what: "a client CA bundle that is a directory",
      args: [...tls, "--tls-client-ca", dir],
      env: {},
      message: `--tls-client-ca: ${dir}: is a directory, not a file`,
    },
  ])("refuses $what, naming the flag, the path and the reason", async ({ args, env, message }) => {
    const dataDir = join(scratchDir("cli-files"), "data");
    const run = await runCli(["serve", "--port", "0", "--data-dir", dataDir, ...args], env);
    expectRefused(run, message);
    // Refused before the backend is built: no data directory is left behind.
    expect(existsSync(dataDir)).toBe(false);
  });

  it.each([
    { what: "a file", path: plain, create: false, reason: "not a directory" },
    {
      what: "a path whose parent does not exist",
      path: join(dir, "typo", "data"),
      create: false,
      reason: `its parent ${join(dir, "typo")} does not exist`,
    },
    {
      what: "a path below a file",
      path: join(plain, "data"),
      create: false,
      reason: "a part of the path is not a directory",
    },
  ])("serve refuses a data directory that is $what", async ({ path, reason }) => {
    const run = await runCli(["serve", "--port", "0", "--data-dir", path]);
    expectRefused(run, `--data-dir: ${path}: ${reason}`);
    expect(existsSync(join(dir, "typo"))).toBe(false);
  });

  it("serves a group's data directory it may write but not chmod, and refuses one open to all", async () => {
    // Root may chmod anything, so as root the commands run as nobody, who owns neither.
    const root = process.getuid?.() === 0;
    const asUser = root ? { uid: 65534, gid: 65534 } : {};
    const base = scratchDir("cli-group");
    chmodSync(base, 0o755);
    const shared = join(base, "shared");
    mkdirSync(shared);
    // A volume whose group the platform gave the server's user (Kubernetes' fsGroup): 2770.
    if (root) chownSync(shared, 0, 65534);
    chmodSync(shared, 0o2770);
    const sweep = await runCli(["sweep", "--data-dir", shared], {}, asUser);
    expect(sweep.stderr).toBe("");
    expect(sweep.code).toBe(0);
    // Through a symlink, as a volume is often mounted: the directory's mode counts, not the
    // link's (always 0777).
    const linked = join(base, "linked");
    symlinkSync(shared, linked);
    const throughLink = await runCli(["sweep", "--data-dir", linked], {}, asUser);
    expect(throughLink.stderr).toBe("");
    expect(throughLink.code).toBe(0);
    // /tmp is root's and open to every user: tightening it fails, and serving from it would
    // leave every output readable by the machine's users.
    const open = await runCli(["sweep", "--data-dir", "/tmp"], {}, root ? asUser : {});
    expectRefused(
      open,
      "--data-dir: /tmp: owned by another user and open to every user (mode 1777); this process cannot make it 0700",
    );
  });

  it("refuses a data directory this user may not write, for serve and sweep", async () => {
    const base = scratchDir("cli-perm");
    chmodSync(base, 0o755);
    const locked = join(base, "locked");
    mkdirSync(locked, { mode: 0o555 });
    chmodSync(locked, 0o555);
    const owned = join(base, "owned");
    mkdirSync(owned, { mode: 0o700 });
    // Root may write anywhere, so as root the server runs as nobody, who owns neither.
    const asUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const unwritable = process.getuid?.() === 0 ? owned : locked;
    const serve = await runCli(["serve", "--port", "0", "--data-dir", unwritable], {}, asUser);
    expectRefused(serve, `--data-dir: ${unwritable}: permission denied to this process`);
    const sweep = await runCli(["sweep", "--data-dir", unwritable], {}, asUser);
    expectRefused(sweep, `--data-dir: ${unwritable}: permission denied to this process`);
    const below = join(locked, "data");
    const create = await runCli(["serve", "--port", "0", "--data-dir", below], {}, asUser);
    expectRefused(
      create,
      `--data-dir: ${below}: cannot be created in ${locked}: permission denied`,
    );
  });
});

describe("spillway sweep and its data directory", () => {
  it("refuses the default ./data when it is absent, saying it is the default", async () => {
    const cwd = scratchDir("cli-sweep");
    const run = await runCli(["sweep"], {}, cwd);
    expectRefused(run, `--data-dir (default ./data): ${join(cwd, "data")}: does not exist`);
    expect(existsSync(join(cwd, "data"))).toBe(false);
  });

  it("refuses a missing data directory named by the environment, naming the variable", async () => {
    const missing = join(scratchDir("cli-sweep"), "no-such-dir");
    const run = await runCli(["sweep"], { SPILLWAY_DATA_DIR: missing });
    expectRefused(run, `--data-dir (SPILLWAY_DATA_DIR): ${missing}: does not exist`);
    expect(existsSync(missing)).toBe(false);
  });

  it("refuses a data directory that is a file", async () => {
    const file = join(scratchDir("cli-sweep"), "file");
    writeFileSync(file, "x");
    const run = await runCli(["sweep", "--data-dir", file]);
    expectRefused(run, `--data-dir: ${file}: not a directory`);
  });

  it("sweeps an existing data directory and prints its report", async () => {
    const dataDir = scratchDir("cli-sweep");
    const run = await runCli(["sweep", "--data-dir", dataDir, "--orphan-age-ms", "1h"]);
    expect(JSON.parse(run.stdout)).toMatchObject({ expiredRuns: 0, orphanBlobs: 0 });
    expect(run.code).toBe(0);
  });
});

describe("commands and flags given to the wrong command", () => {
  it.each([
    { args: ["server"], problem: 'unknown command "server"; did you mean "serve"?' },
    { args: ["swep", "--data-dir", "x"], problem: 'unknown command "swep"; did you mean "sweep"?' },
    // `npm start` serves; `stat`, one letter away, is a client command it never meant.
    { args: ["start"], problem: 'unknown command "start"; did you mean "serve"?' },
    {
      args: ["sweep", "--port", "5"],
      problem:
        "--port does not apply to sweep, which reads the backend flags, --orphan-age-ms and --log-level",
    },
    {
      args: ["sweep", "--max-blob-bytes", "1GiB"],
      problem: "--max-blob-bytes does not apply to sweep",
    },
    { args: ["serve", "extra"], problem: 'unexpected argument "extra" after serve' },
    {
      args: ["serve", "--max-blob-byte", "5"],
      problem: 'unknown flag "--max-blob-byte"; did you mean "--max-blob-bytes"?',
    },
    { args: ["serve", "--port"], problem: "Option '--port <value>' argument missing" },
  ])("$args: says $problem with the usage and exits 2", async ({ args, problem }) => {
    const run = await runCli(args);
    expect(run.stderr).toContain(`spillway: ${problem}`);
    expect(run.stderr).toContain("Usage: spillway serve");
    expect(run.stdout).toBe("");
    expect(run.code).toBe(2);
  });

  it("answers `spillway version` as `spillway --version`", async () => {
    const flag = await runCli(["--version"]);
    const command = await runCli(["version"]);
    expect(command).toEqual(flag);
    expect(command.stdout).toMatch(/^spillway \d+\.\d+\.\d+/);
  });
});

describe("log level", () => {
  it("refuses a level pino does not know, naming the variable", async () => {
    const run = await runCli(["serve", "--port", "0", "--backend", "memory"], {
      SPILLWAY_LOG_LEVEL: "verbose",
    });
    expectRefused(
      run,
      '--log-level (SPILLWAY_LOG_LEVEL): expected one of trace, debug, info, warn, error, fatal, silent, got "verbose"',
    );
  });

  it("logs each call at debug with --log-level debug, and not at the default info", async () => {
    for (const [args, debugLines] of [
      [["--log-level", "debug"], true],
      [[], false],
    ] as const) {
      const server = await spawnSpillway(["--backend", "memory", ...args]);
      try {
        await createSpillwayClient({ baseUrl: server.url }).raw.getServerInfo({});
        await server.stop();
        expect(server.output().includes('"level":20'), args.join(" ")).toBe(debugLines);
      } finally {
        server.kill();
      }
    }
  });
});

describe("a token file with no token", () => {
  it("starts with a warning, and warns again when a reload leaves it empty", async () => {
    const dir = scratchDir("cli-empty-tokens");
    const tokenFile = join(dir, "tokens");
    writeFileSync(tokenFile, "# no tenants yet\n\n");
    const server = await spawnSpillway(["--backend", "memory", "--token-file", tokenFile]);
    const warnings = () => server.output().split("the token file holds no token").length - 1;
    try {
      await waitFor(async () => warnings() === 1, 5_000);
      writeFileSync(tokenFile, `${hashToken("t")} acme\n`);
      server.kill("SIGHUP");
      await waitFor(async () => server.output().includes('"tokens":1'), 5_000);
      const info = await createSpillwayClient({
        baseUrl: server.url,
        token: "t",
      }).raw.getServerInfo({});
      expect(info.tenant).toBe("acme");
      writeFileSync(tokenFile, "");
      server.kill("SIGHUP");
      await waitFor(async () => warnings() === 2, 5_000);
    } finally {
      await server.stop();
    }
  });
});

describe("spillway serve under a restrictive umask", () => {
  it("still writes in the tree it makes under umask 0277, its files private", async () => {
    const dataDir = join(scratchDir("umask"), "data");
    const server = await spawnSpillway(["--data-dir", dataDir], {}, undefined, { umask: "0277" });
    try {
      const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
      const att = await spillway.offload(
        { tenant: "dev", runId: "run-1", callId: "call-1" },
        "an output\n".repeat(10_000),
      );
      expect(att.handle).toBe("res_call-1");
      // Made 0500 under that umask: only root, as these tests may run, could still write there.
      const made = readdirSync(dataDir, { recursive: true, withFileTypes: true });
      expect(made.length).toBeGreaterThan(3);
      for (const entry of made) {
        const mode = statSync(join(entry.parentPath, entry.name)).mode & 0o777;
        expect([entry.name, mode]).toEqual([entry.name, entry.isDirectory() ? 0o700 : 0o600]);
      }
    } finally {
      await server.stop();
    }
  });
});

describe("spillway serve on a data directory that may be the wrong one", () => {
  it("warns of entries no server makes there, and says when it holds no outputs", async () => {
    const deep = scratchDir("data-root");
    // A restore unpacked one level too deep: the store's tree is under data/.
    mkdirSync(join(deep, "data", "t"), { recursive: true });
    const misplaced = await spawnSpillway(["--data-dir", deep]);
    await misplaced.stop();
    expect(misplaced.output()).toContain(
      '"entries":["data"],"more":0,"msg":"the data directory holds entries no Spillway server makes there',
    );
    const fresh = await spawnSpillway(["--data-dir", join(scratchDir("data-root"), "new")]);
    await fresh.stop();
    expect(fresh.output()).toContain('"msg":"the data directory holds no outputs: a new store');
    expect(fresh.output()).not.toContain("entries no Spillway server makes");
  });
});
