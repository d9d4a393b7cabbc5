import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuthenticator, DEV_TENANT, hashToken, parseTokenFile } from "./auth.js";

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
  ])("refuses %s with the line number", (_, line) => {
    expect(() => parseTokenFile(`\n${line}\n`)).toThrow(/line 2/);
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

  it("picks up a changed token file on reload", async () => {
    const auth = createAuthenticator({ tokenFile: file });
    await writeFile(file, `${hashToken("gamma")} tenant-c\n`);
    auth.reload();
    expect(auth.entryFor("Bearer gamma").tenant).toBe("tenant-c");
    expect(() => auth.entryFor("Bearer alpha").tenant).toThrow();
  });

  it("maps everyone to the dev tenant without a token file", () => {
    const auth = createAuthenticator({});
    expect(auth.enforcing).toBe(false);
    expect(auth.entryFor(null).tenant).toBe(DEV_TENANT);
  });
});
