import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuthenticator, DEV_TENANT, hashToken, parseTokenFile } from "./auth.js";
import { createMemoryBackend } from "./backends/memory.js";
import { startSpillwayServer } from "./server.js";

describe("token file", () => {
  it("maps token digests to tenants, ignoring comments and blank lines", () => {
    const tokens = parseTokenFile(`# operators\n\n${hashToken("s3cret")} acme\n`);
    expect(tokens.get(hashToken("s3cret"))).toEqual({ tenant: "acme" });
    expect(tokens.size).toBe(1);
  });

  it("reads a tenant's own blob limit and refuses two different limits for one tenant", () => {
    const tokens = parseTokenFile(
      `${hashToken("a")} acme max_blob_bytes=1000\n${hashToken("b")} acme max_blob_bytes=1000\n`,
    );
    expect(tokens.get(hashToken("b"))).toEqual({ tenant: "acme", maxBlobBytes: 1000 });
    expect(() =>
      parseTokenFile(`${hashToken("a")} acme max_blob_bytes=1\n${hashToken("b")} acme\n`),
    ).toThrow(/two different limits/);
  });

  it("reads both limits in any order and refuses unknown, repeated or malformed ones", () => {
    const tokens = parseTokenFile(
      `${hashToken("a")} acme max_run_bytes=5000 max_blob_bytes=1000\n${hashToken("b")} acme max_blob_bytes=1000 max_run_bytes=5000\n`,
    );
    expect(tokens.get(hashToken("a"))).toEqual({
      tenant: "acme",
      maxBlobBytes: 1000,
      maxRunBytes: 5000,
    });
    expect(() =>
      parseTokenFile(`${hashToken("a")} acme max_run_bytes=5\n${hashToken("b")} acme\n`),
    ).toThrow(/two different limits/);
    expect(
      parseTokenFile(`${hashToken("a")} acme max_calls=8 max_inflight_bytes=65536\n`).get(
        hashToken("a"),
      ),
    ).toEqual({ tenant: "acme", maxCalls: 8, maxInflightBytes: 65536 });
    expect(() =>
      parseTokenFile(`${hashToken("a")} acme max_calls=8\n${hashToken("b")} acme max_calls=9\n`),
    ).toThrow(/two different limits/);
    for (const attributes of [
      "max_files=3",
      "max_run_bytes=1 max_run_bytes=2",
      "max_run_bytes=-1",
      "max_calls=1 max_calls=1",
      "max_run_bytes=99999999999999999999",
    ]) {
      expect(() => parseTokenFile(`${hashToken("a")} acme ${attributes}\n`)).toThrow(/line 1/);
    }
  });

  it.each([
    ["a plain token instead of a digest", "s3cret acme"],
    ["a traversing tenant", `${hashToken("x")} ..`],
    ["a tenant with a slash", `${hashToken("x")} a/b`],
    ["a tenant with ESC", `${hashToken("x")} a\u001b[31mb`],
    ["a tenant with DEL", `${hashToken("x")} a\u007fb`],
    ["a tenant with NEL (C1)", `${hashToken("x")} a\u0085b`],
    ["a tenant with CSI (C1)", `${hashToken("x")} a\u009bb`],
    ["a tenant over 64 bytes", `${hashToken("x")} ${"é".repeat(33)}`],
  ])("refuses %s with the line number", (_, line) => {
    expect(() => parseTokenFile(`\n${line}\n`)).toThrow(/line 2: invalid tenant|line 2: expected/);
  });

  it("refuses a limit of 0, which would lift the server's limit for that tenant", () => {
    // The server reads 0 as "no limit": max_inflight_bytes=0 gave the tenant the whole
    // server's in-flight bytes, past --max-inflight-bytes-per-tenant, though a tenant's limits
    // may only lower the server's.
    for (const attribute of [
      "max_inflight_bytes",
      "max_calls",
      "max_blob_bytes",
      "max_run_bytes",
    ]) {
      expect(() => parseTokenFile(`# tenants\n${hashToken("a")} acme ${attribute}=0\n`)).toThrow(
        `token file line 2: ${attribute}=0: a tenant's limit must be at least 1`,
      );
    }
  });

  it("reads sizes with units, as the server's flags take them, and refuses bad ones", () => {
    const tokens = parseTokenFile(
      `${hashToken("a")} acme max_blob_bytes=10GiB max_run_bytes=2GB max_inflight_bytes=64MiB max_calls=8\n${hashToken("b")} acme max_blob_bytes=10737418240 max_run_bytes=2000000000 max_inflight_bytes=67108864 max_calls=8\n`,
    );
    expect(tokens.get(hashToken("a"))).toEqual({
      tenant: "acme",
      maxBlobBytes: 10 * 1024 ** 3,
      maxRunBytes: 2_000_000_000,
      maxInflightBytes: 64 * 1024 ** 2,
      maxCalls: 8,
    });
    expect(() => parseTokenFile(`${hashToken("a")} acme max_blob_bytes=10G\n`)).toThrow(
      'token file line 1: max_blob_bytes=10G: unknown unit "G"',
    );
    expect(() => parseTokenFile(`${hashToken("a")} acme max_calls=8k\n`)).toThrow(
      "token file line 1: max_calls=8k: expected a whole number",
    );
    expect(() => parseTokenFile(`${hashToken("a")} acme max_run_bytes=9000TiB\n`)).toThrow(
      "token file line 1: max_run_bytes=9000TiB: more than 9007199254740991 bytes",
    );
  });

  it("accepts the dev tenant and printable Unicode tenants", () => {
    const tokens = parseTokenFile(
      `${hashToken("a")} ${DEV_TENANT}\n${hashToken("b")} équipe-東京_1\n${hashToken("c")} ${"x".repeat(64)}\n`,
    );
    expect([...tokens.values()].map((e) => e.tenant)).toEqual([
      DEV_TENANT,
      "équipe-東京_1",
      "x".repeat(64),
    ]);
  });
});

describe("authenticator", () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-auth-"));
    file = join(dir, "tokens");
    await writeFile(file, `${hashToken("alpha")} tenant-a\n`);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("resolves a bearer token and refuses others with UNAUTHENTICATED", () => {
    const auth = createAuthenticator({ tokenFile: file });
    expect(auth.entryFor("Bearer alpha").tenant).toBe("tenant-a");
    for (const header of [null, "alpha", "Bearer beta", "Basic alpha"]) {
      try {
        auth.entryFor(header).tenant;
        expect.unreachable();
      } catch (err) {
        expect(ConnectError.from(err).code).toBe(Code.Unauthenticated);
      }
    }
  });

  it.each([
    [null, "missing bearer token"],
    ["", "missing bearer token"],
    ["Bearer alpha, Bearer beta", "several authorization headers (send one)"],
    ["Basic YWxwaGE6", "the authorization scheme is not Bearer"],
    ["alpha", "the authorization scheme is not Bearer"],
    [
      "Bearer alpha extra",
      "malformed bearer token (one token of visible characters, nothing after it)",
    ],
    ["Bearer", "malformed bearer token (one token of visible characters, nothing after it)"],
  ])("says what is wrong with the authorization header %j, never echoing it", (header, reason) => {
    const auth = createAuthenticator({ tokenFile: file });
    const err = ConnectError.from(
      (() => {
        try {
          auth.entryFor(header);
        } catch (e) {
          return e;
        }
        throw new Error("accepted");
      })(),
    );
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toBe(`${reason}: send the header "authorization: Bearer <token>"`);
  });

  it("picks up a changed token file on reload", async () => {
    const auth = createAuthenticator({ tokenFile: file });
    await writeFile(file, `${hashToken("gamma")} tenant-c\n`);
    auth.reload();
    expect(auth.entryFor("Bearer gamma").tenant).toBe("tenant-c");
    expect(() => auth.entryFor("Bearer alpha").tenant).toThrow();
  });

  it("refuses at load a token file mapping a token to a tenant with a control character", async () => {
    const bad = join(dir, "bad-tokens");
    await writeFile(bad, `${hashToken("alpha")} tenant-a\n${hashToken("esc")} evil\u001b[2J\n`);
    expect(() => createAuthenticator({ tokenFile: bad })).toThrow(/line 2: invalid tenant/);
    // A reload that meets such a tenant fails and keeps the tokens in force.
    const reloaded = join(dir, "reloaded-tokens");
    await writeFile(reloaded, `${hashToken("alpha")} tenant-a\n`);
    const auth = createAuthenticator({ tokenFile: reloaded });
    await writeFile(reloaded, `${hashToken("nel")} a\u0085b\n`);
    expect(() => auth.reload()).toThrow(/line 1: invalid tenant/);
    expect(auth.entryFor("Bearer alpha").tenant).toBe("tenant-a");
    expect(() => auth.entryFor("Bearer nel")).toThrow();
  });

  it("names the flag, the path and the reason when the file cannot be read or parsed", async () => {
    expect(() => createAuthenticator({ tokenFile: dir })).toThrow(
      `--token-file: ${dir}: is a directory, not a file`,
    );
    const missing = join(dir, "missing");
    expect(() =>
      createAuthenticator({ tokenFile: missing, name: "--token-file (SPILLWAY_TOKEN_FILE)" }),
    ).toThrow(`--token-file (SPILLWAY_TOKEN_FILE): ${missing}: no such file or directory`);
    const garbled = join(dir, "garbled");
    await writeFile(garbled, "not a token line\n");
    expect(() => createAuthenticator({ tokenFile: garbled })).toThrow(
      `--token-file: ${garbled}: token file line 1: expected`,
    );
  });

  it("counts the tokens in force, 0 for a file of comments", async () => {
    const empty = join(dir, "empty");
    await writeFile(empty, "# no tenants yet\n\n");
    const auth = createAuthenticator({ tokenFile: empty });
    expect(auth.count()).toBe(0);
    await writeFile(empty, `${hashToken("a")} acme\n${hashToken("b")} acme\n`);
    expect(auth.reload()).toBe(2);
    expect(auth.count()).toBe(2);
  });

  it("maps everyone to the dev tenant without a token file", () => {
    const auth = createAuthenticator({});
    expect(auth.enforcing).toBe(false);
    expect(auth.entryFor(null).tenant).toBe(DEV_TENANT);
  });
});

describe("a tenant's max_inflight_bytes", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-tokens-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("is refused at start below what one call reserves, as the server flag is", async () => {
    // Below one call's weight the tenant could make no offload and no read at all, while
    // GetServerInfo and health said all was well.
    const tokenFile = join(dir, "tokens");
    await writeFile(tokenFile, `${hashToken("a")} acme max_inflight_bytes=10\n`);
    await expect(
      startSpillwayServer({ backend: createMemoryBackend(), port: 0, tokenFile }),
    ).rejects.toThrow(
      "token file line 1: max_inflight_bytes=10 is below the 4210688 bytes one call reserves",
    );
  });
});
