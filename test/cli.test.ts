import { type SpawnSyncReturns, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { COMMAND_NAMES } from "@spillway/cli";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_COMMAND_NAMES } from "../server/src/package-command.js";
import { spillwayClientCli } from "./support/package-bins.js";
import { scratchDir } from "./support/scratch-dir.js";
import { writeSelfSigned } from "./support/self-signed.js";
import { type SpillwayProcess, spawnSpillway, spillwayCli } from "./support/spawn-spillway.js";

const token = "cli-test-token";
const tenant = "cli-tenant";
const otherToken = "cli-other-token";
/** 64 MiB of random bytes: the large output `cat` must return byte for byte. */
const bigBytes = 64 * 1024 * 1024;
/** 20,000 lines of text with rare and common words for head, tail and grep. */
const textLines = Array.from(
  { length: 20_000 },
  (_, i) =>
    `${i + 1} ${i % 997 === 0 ? "ERROR disk quota exceeded" : i % 13 === 0 ? "warn Retry" : "info ok"} ${"x".repeat(i % 50)}`,
);

const sha256 = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

describe("spillway-cli against spillway serve", () => {
  const dir = scratchDir("spillway-cli-");
  const bigFile = join(dir, "big.bin");
  const textFile = join(dir, "text.log");
  let spillway: SpillwayProcess;
  let textHandle: string;

  /** Runs `spillway-cli` (or, with `viaServer`, `spillway <command>`) as the given tenant. */
  const cli = (
    args: readonly string[],
    opts: { viaServer?: boolean; token?: string; input?: string } = {},
  ): SpawnSyncReturns<string> =>
    spawnSync(process.execPath, [opts.viaServer ? spillwayCli : spillwayClientCli, ...args], {
      encoding: "utf8",
      maxBuffer: 16 * 1024 * 1024,
      env: { ...process.env, SPILLWAY_URL: spillway.url, SPILLWAY_TOKEN: opts.token ?? token },
      ...(opts.input === undefined ? {} : { input: opts.input }),
    });
  /** Runs a shell pipeline with the CLI as `$CLI` and the server's executable as `$SPILLWAY`. */
  const shell = (script: string): SpawnSyncReturns<string> =>
    spawnSync("bash", ["-c", script], {
      encoding: "utf8",
      maxBuffer: 16 * 1024 * 1024,
      env: {
        ...process.env,
        SPILLWAY_URL: spillway.url,
        SPILLWAY_TOKEN: token,
        CLI: `${process.execPath} ${spillwayClientCli}`,
        SPILLWAY: `${process.execPath} ${spillwayCli}`,
      },
    });

  beforeAll(async () => {
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, `${sha256(token)} ${tenant}\n${sha256(otherToken)} other-tenant\n`);
    writeFileSync(bigFile, randomBytes(bigBytes));
    writeFileSync(textFile, `${textLines.join("\n")}\n`);
    spillway = await spawnSpillway([
      "--backend",
      "filesystem",
      "--data-dir",
      join(dir, "data"),
      "--token-file",
      tokens,
    ]);
    const put = cli(["put", "--call-id", "text", "--content-type", "text/plain", "logs", textFile]);
    expect(put.stderr).toBe("");
    textHandle = put.stdout.trim();
  });
  afterAll(() => spillway?.stop());

  it("offers the commands `spillway` hands to it", () => {
    expect([...CLIENT_COMMAND_NAMES].sort()).toEqual([...COMMAND_NAMES].sort());
  });

  it("puts a 64 MiB file through `spillway put` quietly off a terminal, and cats it back byte for byte", () => {
    const put = cli(["put", "--call-id", "big", "big-run", bigFile], { viaServer: true });
    expect(put.stderr).toBe("");
    expect(put.status).toBe(0);
    expect(put.stdout).toBe("res_big\n");
    const expected = sha256(readFileSync(bigFile));
    const cat = shell('$CLI cat big-run res_big | sha256sum; echo "$PIPESTATUS"');
    expect(cat.stderr).toBe("");
    expect(cat.stdout).toBe(`${expected}  -\n0\n`);
    // stderr on the same pipe: Node makes the pipe non-blocking, and a reader that starts late
    // fills it, so writes meet EAGAIN and must wait rather than fail.
    const shared = shell(
      '$CLI cat big-run res_big 2>&1 | (sleep 1; sha256sum); echo "$PIPESTATUS"',
    );
    expect(shared.stdout).toBe(`${expected}  -\n0\n`);
    // Into a file, through the server's executable, with the digest checked as it streams.
    const out = join(dir, "big.out");
    const viaServer = shell(`$SPILLWAY cat --verify big-run res_big > ${out}`);
    expect(viaServer.stderr).toBe("");
    expect(viaServer.status).toBe(0);
    expect(sha256(readFileSync(out))).toBe(expected);
  });

  it("cats byte for byte into a Node parent's pipe (a socket) that it reads late", async () => {
    // Node (and so the bench, or any Node tool running the CLI) hands a child a socket pair,
    // not a FIFO: the CLI writes it from the thread pool too, gathering waiting chunks into
    // writev(2) calls that the full socket completes only partly.
    const child = spawn(process.execPath, [spillwayClientCli, "cat", "big-run", "res_big"], {
      env: { ...process.env, SPILLWAY_URL: spillway.url, SPILLWAY_TOKEN: token },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const hash = createHash("sha256");
    let bytes = 0;
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.stdout.pause();
    await new Promise((resolve) => setTimeout(resolve, 500));
    child.stdout.on("data", (chunk: Buffer) => {
      bytes += chunk.byteLength;
      hash.update(chunk);
    });
    child.stdout.resume();
    const [code] = await once(child, "close");
    expect([code, stderr, bytes]).toEqual([0, "", bigBytes]);
    expect(hash.digest("hex")).toBe(sha256(readFileSync(bigFile)));
  });

  it("ends quietly with exit 0 when the reader leaves (cat | head)", () => {
    const run = shell('$CLI cat big-run res_big | head -c 1000 | wc -c; echo "$PIPESTATUS"');
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe("1000\n0\n");
  });

  it("puts stdin as an output", () => {
    const put = cli(["put", "--call-id", "piped", "--name", "echo", "logs", "-"], {
      input: "from stdin\n",
    });
    expect(put.stdout).toBe("res_piped\n");
    expect(cli(["cat", "logs", "res_piped"]).stdout).toBe("from stdin\n");
  });

  it("puts a retry with --attempt as its own output beside the first attempt", () => {
    const first = cli(["put", "--call-id", "retried", "attempts", "-"], { input: "try one\n" });
    const second = cli(["put", "--call-id", "retried", "--attempt", "2", "attempts", "-"], {
      input: "try two\n",
    });
    expect([first.stdout, second.stdout]).toEqual(["res_retried\n", "res@2_retried\n"]);
    expect(cli(["cat", "attempts", "res@2_retried"]).stdout).toBe("try two\n");
    expect(cli(["cat", "attempts", "res_retried"]).stdout).toBe("try one\n");
    const again = cli(["put", "--call-id", "retried", "--attempt", "2", "attempts", "-"], {
      input: "other\n",
    });
    expect(again.status).toBe(16);
    const stat = JSON.parse(cli(["--json", "stat", "attempts", "res@2_retried"]).stdout);
    expect(stat).toMatchObject({ handle: "res@2_retried", attempt: 2 });
    for (const bad of ["0", "1001", "2x", "-1", "01.5"]) {
      const refused = cli(["put", "--call-id", "x", "--attempt", bad, "attempts", "-"], {
        input: "x",
      });
      expect(refused.status, bad).toBe(2);
      expect(refused.stderr).toContain("--attempt");
    }
  });

  it.each([
    ["head", []],
    ["head", ["-n", "3"]],
    ["head", ["-n", "0"]],
    ["head", ["-n", "25000"]],
    ["head", ["-c", "100"]],
    ["tail", []],
    ["tail", ["-n", "1"]],
    ["tail", ["-n", "1500"]],
    ["tail", ["-n", "+19990"]],
    ["tail", ["-n", "30000"]],
    ["tail", ["-c", "77"]],
    ["tail", ["-c", "+500000"]],
  ])("%s %j writes what coreutils writes", (command, flags) => {
    const ours = cli([command, ...flags, "logs", textHandle]);
    const theirs = spawnSync(command, [...flags, textFile], { encoding: "utf8" });
    expect(ours.stderr).toBe("");
    expect(ours.status).toBe(0);
    expect(ours.stdout).toBe(theirs.stdout);
  });

  it.each([
    [["ERROR"]],
    [["-n", "ERROR"]],
    [["-i", "-n", "retry"]],
    [["-E", "-n", "^1[0-9]{3} warn"]],
    [["-F", "-c", "warn"]],
    [["-E", "-c", "ERROR|warn"]],
    [["-n", "-C", "2", "ERROR"]],
    [["-n", "-A", "1", "-B", "3", "warn"]],
    [["-n", "-m", "5", "-A", "2", "warn"]],
    [["-c", "-m", "7", "warn"]],
    [["-n", "-C", "20", "-E", "^99[0-9] "]],
    // A context flag of 0 still separates groups that do not touch with `--`.
    [["-n", "-A", "0", "ERROR"]],
    [["-C", "0", "-m", "3", "ERROR"]],
  ])("grep %j prints what GNU grep prints", (flags) => {
    const ours = cli(["grep", ...flags, "logs", textHandle]);
    const theirs = spawnSync("grep", [...flags, textFile], { encoding: "utf8" });
    expect(ours.stderr).toBe("");
    expect(ours.stdout).toBe(theirs.stdout);
    expect(ours.status).toBe(0);
  });

  it("grep exits 1 when nothing matches, as grep does", () => {
    const none = cli(["grep", "no such words", "logs", textHandle]);
    expect([none.status, none.stdout, none.stderr]).toEqual([1, "", ""]);
    const count = cli(["grep", "-c", "no such words", "logs", textHandle]);
    expect([count.status, count.stdout]).toEqual([1, "0\n"]);
  });

  it("prints the documented JSON shapes with --json", () => {
    const put = JSON.parse(
      cli(["put", "--json", "--call-id", "j", "--ttl", "1h", "json-run", "-"], { input: "a\nb\n" })
        .stdout,
    );
    expect(put).toMatchObject({
      handle: "res_j",
      name: "stdin",
      size_bytes: 4,
      line_count: 2,
      binary: false,
      readable: true,
      sha256: sha256("a\nb\n"),
    });
    expect(typeof put.expire_time).toBe("string");
    const stat = JSON.parse(cli(["--json", "stat", "json-run", "res_j"]).stdout);
    expect(stat).toEqual(put);
    const ls = JSON.parse(cli(["ls", "json-run", "--json"]).stdout);
    expect(ls).toEqual({ run_id: "json-run", outputs: [put] });
    expect(JSON.parse(cli(["fork", "--json", "json-run", "json-child"]).stdout)).toEqual({
      parent_run_id: "json-run",
      run_id: "json-child",
      forked_outputs: 1,
    });
    cli(["put", "--call-id", "from-child", "json-child", "-"], { input: "child\n" });
    expect(JSON.parse(cli(["merge", "--json", "json-child", "json-run"]).stdout)).toEqual({
      run_id: "json-child",
      parent_run_id: "json-run",
      merged_outputs: 1,
      unchanged_outputs: 0,
    });
    expect(cli(["merge", "json-child", "json-run"]).stdout).toBe(
      "merged json-child into json-run: 0 outputs, 1 unchanged\n",
    );
    const ttl = JSON.parse(cli(["ttl", "--json", "json-child", "2h"]).stdout);
    expect(ttl.run_id).toBe("json-child");
    expect(Date.parse(ttl.expire_time) - Date.now()).toBeGreaterThan(7_100_000);
    const runs = JSON.parse(cli(["runs", "--json"]).stdout) as {
      runs: { run_id: string; output_count: number; parent_run_id: string }[];
    };
    expect(runs.runs.find((r) => r.run_id === "json-child")).toMatchObject({
      output_count: 2,
      parent_run_id: "json-run",
    });
    const matches = cli(["grep", "--json", "-A", "1", "a", "json-run", "res_j"]).stdout;
    expect(
      matches
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toEqual([
      {
        line: 1,
        text: "a",
        clipped: false,
        byte_offset: 0,
        before: [],
        after: [{ line: 2, text: "b" }],
      },
    ]);
    expect(JSON.parse(cli(["grep", "--json", "-c", "b", "json-run", "res_j"]).stdout)).toEqual({
      count: 1,
    });
    expect(JSON.parse(cli(["rm", "--json", "json-child"]).stdout)).toEqual({
      run_id: "json-child",
      deleted_outputs: 2,
    });
  });

  it("shows people tables and records", () => {
    const ls = cli(["ls", "logs"]).stdout.split("\n");
    expect(ls[0]).toMatch(/^HANDLE\s+SIZE\s+LINES\s+TYPE\s+CREATED\s+NAME$/);
    expect(ls.find((l) => l.startsWith(textHandle))).toMatch(/20000\s+text\/plain/);
    expect(cli(["stat", "logs", textHandle]).stdout).toContain(
      `sha256:       ${sha256(readFileSync(textFile))}\n`,
    );
    expect(cli(["runs"]).stdout).toMatch(/^big-run\s+1\s+64\.0 MiB\s/m);
  });

  it("exits 10 + the gRPC code, through spillway-cli and spillway alike", () => {
    for (const viaServer of [false, true]) {
      const notFound = cli(["ttl", "no-such-run", "1h"], { viaServer });
      expect([notFound.status, notFound.stderr]).toEqual([
        15,
        'spillway-cli: NOT_FOUND: run "no-such-run" does not exist or has expired\n',
      ]);
      const denied = cli(["stat", "logs", "res_nope"], { viaServer });
      expect(denied.status).toBe(17);
      expect(denied.stderr).toMatch(/^spillway-cli: PERMISSION_DENIED: /);
      const unauthenticated = cli(["ls", "logs"], { viaServer, token: "wrong" });
      expect(unauthenticated.status).toBe(26);
      expect(unauthenticated.stderr).toMatch(/^spillway-cli: UNAUTHENTICATED: /);
      expect(unauthenticated.stdout).toBe("");
    }
    // Another tenant's token sees none of this tenant's outputs.
    expect(cli(["cat", "logs", textHandle], { token: otherToken }).status).toBe(17);
  });

  it("exits 2 on a usage error, before any call", () => {
    for (const args of [
      ["frobnicate"],
      ["cat", "logs"],
      ["tail", "-n", "x", "logs", "h"],
      ["ls"],
    ]) {
      const run = cli(args);
      expect(run.status, args.join(" ")).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toMatch(/^spillway-cli: /);
    }
    expect(cli(["grep", "--frob", "x", "logs", "h"], { viaServer: true }).status).toBe(2);
    // grpcurl's host:port, or another scheme, is a usage error naming --url, not "Invalid URL".
    for (const url of ["127.0.0.1:50051", "ftp://127.0.0.1:50051", "http//x"]) {
      const run = cli(["--url", url, "runs"]);
      expect(run.status, url).toBe(2);
      expect(run.stderr).toContain(
        `--url (or SPILLWAY_URL): expected http://host:port or https://host:port, got "${url}"`,
      );
    }
    expect(cli(["put", "logs", join(dir, "missing")]).status).toBe(3);
  });

  it("takes the global flags before the command through spillway too, as docs/cli.md says", () => {
    const url = ["--url", spillway.url];
    for (const args of [
      [...url, "ls", "logs"],
      [`--url=${spillway.url}`, "--json", "ls", "logs"],
      ["--json", ...url, "ls", "logs"],
    ]) {
      const direct = cli(args);
      expect(direct.status, args.join(" ")).toBe(0);
      const viaServer = cli(args, { viaServer: true });
      expect(viaServer.stderr, args.join(" ")).toBe("");
      expect(viaServer.status).toBe(0);
      expect(viaServer.stdout).toBe(direct.stdout);
    }
    // A server flag before `serve` is still the server's.
    const serve = cli(["--token-file", join(dir, "missing"), "serve"], { viaServer: true });
    expect(serve.status).not.toBe(0);
    expect(serve.stderr).toMatch(/^spillway: --token-file: /);
  });

  it("trusts a self-signed server through --tls-ca or SPILLWAY_TLS_CA, and not without", async () => {
    const certFile = join(dir, "server.pem");
    const keyFile = join(dir, "server-key.pem");
    writeSelfSigned({ certFile, keyFile, commonName: "localhost", altNames: ["IP:127.0.0.1"] });
    const tls = await spawnSpillway([
      "--backend",
      "memory",
      "--tls-cert",
      certFile,
      "--tls-key",
      keyFile,
    ]);
    try {
      expect(tls.url).toMatch(/^https:/);
      const run = (args: readonly string[], env: NodeJS.ProcessEnv = {}) =>
        spawnSync(process.execPath, [spillwayClientCli, "--url", tls.url, ...args], {
          encoding: "utf8",
          input: "over tls\n",
          env: { ...process.env, SPILLWAY_TOKEN: "", SPILLWAY_TLS_CA: "", ...env },
        });
      const put = run(["--tls-ca", certFile, "put", "--call-id", "t", "tls-run", "-"]);
      expect([put.status, put.stdout, put.stderr]).toEqual([0, "res_t\n", ""]);
      const cat = run(["cat", "tls-run", "res_t"], { SPILLWAY_TLS_CA: certFile });
      expect([cat.status, cat.stdout]).toEqual([0, "over tls\n"]);
      const untrusted = run(["cat", "tls-run", "res_t"]);
      // Connect reports a failed TLS handshake as INTERNAL, naming the certificate.
      expect(untrusted.status).toBe(23);
      expect(untrusted.stderr).toMatch(/^spillway-cli: INTERNAL: .*certificate/i);
    } finally {
      await tls.stop();
    }
  });

  it("draws a progress bar with bytes, rate and ETA on a terminal (a real pty from script(1))", () => {
    const run = spawnSync(
      "script",
      ["-qfec", `$CLI put --call-id tty tty-run ${bigFile}`, "/dev/null"],
      {
        encoding: "utf8",
        env: {
          ...process.env,
          SPILLWAY_URL: spillway.url,
          SPILLWAY_TOKEN: token,
          CLI: `${process.execPath} ${spillwayClientCli}`,
        },
      },
    );
    expect(run.status).toBe(0);
    const frames = run.stdout.split("\r").map((f) => f.replaceAll("\u001b[K", ""));
    const last = frames.findLast((f) => f.includes("%")) ?? "";
    expect(last).toMatch(
      /^big\.bin \[#+\] 100% {2}64\.0 MiB \/ 64\.0 MiB {2}[0-9.]+ [KMG]iB\/s {2}ETA 0s$/,
    );
    expect(frames.some((f) => /\[#*-+\]\s+[0-9]+% {2}.* MiB \/ 64\.0 MiB {2}.*ETA/.test(f))).toBe(
      true,
    );
    expect(run.stdout.trimEnd().endsWith("res_tty")).toBe(true);
  });
});
