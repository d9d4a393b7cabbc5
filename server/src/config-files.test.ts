import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../test/support/scratch-dir.js";
import { writeSelfSigned } from "../../test/support/self-signed.js";
import { checkDataDir, loadTlsCredentials, readConfigFile } from "./config-files.js";

describe("readConfigFile", () => {
  const dir = scratchDir("config-files");

  it("names the setting, the path and the reason in words", () => {
    expect(() => readConfigFile(dir, "--token-file")).toThrow(
      `--token-file: ${dir}: is a directory, not a file`,
    );
    expect(() => readConfigFile(join(dir, "nope"), "--x (SPILLWAY_X)")).toThrow(
      `--x (SPILLWAY_X): ${join(dir, "nope")}: no such file or directory`,
    );
    const file = join(dir, "file");
    writeFileSync(file, "x");
    expect(() => readConfigFile(join(file, "below"), "--x")).toThrow(
      `--x: ${join(file, "below")}: a part of the path is not a directory`,
    );
  });
});

describe("checkDataDir", () => {
  const dir = scratchDir("data-dir");
  const file = join(dir, "file");
  writeFileSync(file, "x");

  it("accepts an existing directory, and a missing one to create in an existing parent", () => {
    expect(() => checkDataDir(dir, "--data-dir", { create: false })).not.toThrow();
    expect(() => checkDataDir(join(dir, "new"), "--data-dir", { create: true })).not.toThrow();
  });

  it.each([
    { path: "file", create: true, reason: "not a directory" },
    { path: "missing", create: false, reason: "does not exist" },
    { path: "a/b/c", create: true, reason: `its parent ${join(dir, "a/b")} does not exist` },
    { path: "file/c", create: true, reason: "a part of the path is not a directory" },
  ])("refuses $path (create: $create): $reason", ({ path, create, reason }) => {
    const root = join(dir, path);
    expect(() => checkDataDir(root, "--data-dir (SPILLWAY_DATA_DIR)", { create })).toThrow(
      `--data-dir (SPILLWAY_DATA_DIR): ${root}: ${reason}`,
    );
  });
});

describe("loadTlsCredentials", () => {
  const dir = scratchDir("tls-files");
  const a = { certFile: join(dir, "a.crt"), keyFile: join(dir, "a.key"), commonName: "a" };
  const b = { certFile: join(dir, "b.crt"), keyFile: join(dir, "b.key"), commonName: "b" };
  writeSelfSigned(a);
  writeSelfSigned(b);
  const garbage = join(dir, "garbage.pem");
  writeFileSync(garbage, "not a pem\n");
  const empty = join(dir, "empty.pem");
  writeFileSync(empty, "");
  mkdirSync(join(dir, "sub"));

  it("reads a matching certificate, key and client CA bundle", () => {
    const credentials = loadTlsCredentials({ ...a, clientCaFile: b.certFile });
    expect(credentials.cert.toString()).toContain("BEGIN CERTIFICATE");
    expect(credentials.ca?.toString()).toContain("BEGIN CERTIFICATE");
  });

  it.each([
    {
      what: "a certificate file that is a directory",
      files: { certFile: join(dir, "sub"), keyFile: a.keyFile },
      message: `--tls-cert: ${join(dir, "sub")}: is a directory, not a file`,
    },
    {
      what: "a certificate file without a certificate",
      files: { certFile: garbage, keyFile: a.keyFile },
      message: `--tls-cert: ${garbage}: holds no PEM certificate`,
    },
    {
      what: "the key given as the certificate",
      files: { certFile: a.keyFile, keyFile: a.certFile },
      message: `--tls-cert: ${a.keyFile}: holds no PEM certificate`,
    },
    {
      what: "a key file without a key",
      files: { certFile: a.certFile, keyFile: garbage },
      message: `--tls-key: ${garbage}: not an unencrypted PEM private key`,
    },
    {
      what: "a missing key file",
      files: { certFile: a.certFile, keyFile: join(dir, "none.key") },
      message: `--tls-key: ${join(dir, "none.key")}: no such file or directory`,
    },
    {
      what: "a key of another certificate",
      files: { certFile: a.certFile, keyFile: b.keyFile },
      message: `--tls-key: ${b.keyFile}: does not match the certificate in ${a.certFile}`,
    },
    {
      what: "an empty client CA bundle, which would refuse every client",
      files: { ...a, clientCaFile: empty },
      message: `--tls-client-ca: ${empty}: holds no PEM certificate, so no client could connect`,
    },
    {
      what: "a client CA bundle that is a directory",
      files: { ...a, clientCaFile: dir },
      message: `--tls-client-ca: ${dir}: is a directory, not a file`,
    },
  ])("refuses $what, naming the flag and the path", ({ files, message }) => {
    expect(() => loadTlsCredentials(files)).toThrow(message);
  });
});
