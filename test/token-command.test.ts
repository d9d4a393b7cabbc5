import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, describe, expect, it } from "vitest";
import { hashToken } from "../server/src/auth.js";
import { runCli } from "./support/run-cli.js";
import { scratchDir } from "./support/scratch-dir.js";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

/** Runs `spillway token <args>`, the compiled server executable. */
const token = (args: readonly string[]) => runCli(["token", ...args]);

/** The tenant a token authenticates as, or the gRPC code that refuses it. */
async function tenantOf(url: string, bearer: string): Promise<string> {
  try {
    return (await createSpillwayClient({ baseUrl: url, token: bearer }).serverInfo()).tenant;
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
}

/**
 * `spillway token add` as an operator uses it: the token it prints once authenticates against
 * a server started on the file it wrote, and one added later authenticates after SIGHUP.
 */
describe("spillway token add", () => {
  const dir = scratchDir("spillway-token-");
  const file = join(dir, "tokens");
  let spillway: SpillwayProcess | undefined;
  afterAll(() => spillway?.stop());

  it("prints a new 256-bit token once and appends its hash to a 0600 file the server loads", async () => {
    const first = await token(["add", "alice", "--token-file", file, "--max-calls", "8"]);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^[A-Za-z0-9_-]{43}\n$/);
    expect(first.stderr).toContain("SIGHUP");
    const alice = first.stdout.trim();
    expect(Buffer.from(alice, "base64url")).toHaveLength(32);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8")).toBe(`${hashToken(alice)} alice max_calls=8\n`);
    expect(readFileSync(file, "utf8")).not.toContain(alice);
    // A second token for the same tenant is a different one.
    const again = await token(["add", "alice", "--token-file", file, "--max-calls", "8"]);
    expect(again.stdout.trim()).not.toBe(alice);

    spillway = await spawnSpillway(["--backend", "memory", "--token-file", file]);
    expect(await tenantOf(spillway.url, alice)).toBe("alice");
    expect(await tenantOf(spillway.url, again.stdout.trim())).toBe("alice");

    const added = await token(["add", "bob", "--token-file", file]);
    expect(added.code).toBe(0);
    const bob = added.stdout.trim();
    expect(await tenantOf(spillway.url, bob)).toBe("Unauthenticated");
    spillway.kill("SIGHUP");
    const deadline = Date.now() + 10_000;
    while ((await tenantOf(spillway.url, bob)) !== "bob" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await tenantOf(spillway.url, bob)).toBe("bob");
    expect(await tenantOf(spillway.url, alice)).toBe("alice");
  });

  it("takes sizes with units, as serve's flags and the token file do, and writes them in bytes", async () => {
    const path = join(dir, "units");
    const run = await token([
      "add",
      "erin",
      "--token-file",
      path,
      "--max-blob-bytes",
      "1.5MB",
      "--max-run-bytes",
      "10GiB",
      "--max-inflight-bytes",
      "8MiB",
    ]);
    expect(run.stderr).toContain("SIGHUP");
    expect(run.code).toBe(0);
    expect(readFileSync(path, "utf8")).toBe(
      `${hashToken(run.stdout.trim())} erin max_blob_bytes=1500000 max_run_bytes=10737418240 max_inflight_bytes=8388608\n`,
    );
  });

  it("refuses a tenant or limits the token file parser would refuse, leaving the file as it was", async () => {
    const path = join(dir, "refusals");
    writeFileSync(path, `${hashToken("x")} carol max_calls=4\n`);
    const before = readFileSync(path, "utf8");
    for (const args of [
      ["add", "a/b"],
      ["add", ".."],
      ["add", "x".repeat(65)],
      ["add", "carol", "--max-calls", "5"],
      ["add", "dave", "--max-blob-bytes", "0"],
      ["add", "dave", "--max-run-bytes", "10gigs"],
      ["add", "dave", "--max-blob-bytes", "10KB"],
      ["add", "dave", "--max-calls", "8k"],
      // Below what one call reserves: a server would refuse the file at start and at SIGHUP.
      ["add", "dave", "--max-inflight-bytes", "65536"],
      ["add"],
      ["remove", "dave"],
    ]) {
      const run = await token([...args, "--token-file", path]);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stdout, args.join(" ")).toBe("");
      expect(run.stderr).toMatch(/^spillway: /);
    }
    expect(readFileSync(path, "utf8")).toBe(before);
    expect((await token(["add", "dave"])).stderr).toContain(
      "--token-file (or SPILLWAY_TOKEN_FILE)",
    );
    // The file's fields are split on whitespace, so a tenant containing some would come back as
    // another tenant (with limits the operator never asked for) when the server reads the line.
    for (const tenant of [
      "carol max_calls=4",
      "carol\tmax_calls=4",
      "carol\u00a0max_calls=4",
      "a b",
    ]) {
      const run = await token(["add", tenant, "--token-file", path]);
      expect(run.code, JSON.stringify(tenant)).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toContain("whitespace");
    }
    expect(readFileSync(path, "utf8")).toBe(before);
    const isDir = await token(["add", "dave", "--token-file", dir]);
    expect(isDir.code).toBe(1);
    expect(isDir.stderr).toBe(`spillway: --token-file ${dir}: not a regular file\n`);
  });
});
