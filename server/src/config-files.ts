import { X509Certificate } from "node:crypto";
import { accessSync, constants, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { createSecureContext } from "node:tls";

/**
 * fsReason says in words why a file-system call failed, from its error code; other errors keep
 * their own message.
 */
export function fsReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case "ENOENT":
      return "no such file or directory";
    case "EISDIR":
      return "is a directory, not a file";
    case "ENOTDIR":
      return "a part of the path is not a directory";
    case "EACCES":
    case "EPERM":
      return `permission denied to this process (uid ${process.getuid?.() ?? "?"})`;
    case "ELOOP":
      return "too many symbolic links";
    case "ENAMETOOLONG":
      return "the path is too long";
    default:
      return err instanceof Error ? err.message : String(err);
  }
}

/**
 * readConfigFile reads a whole configuration file, or throws an Error of the form
 * `<name>: <path>: <reason in words>`, where `name` is how the operator set the path (the
 * flag, and the environment variable it came from).
 */
export function readConfigFile(path: string, name: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`${name}: ${path}: ${fsReason(err)}`);
  }
}

/** TlsFiles are the PEM files a TLS listener is built from. */
export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** When set, clients must present a certificate this bundle's CAs signed (mTLS). */
  readonly clientCaFile?: string | undefined;
}

/** How errors name each TLS file's setting; the flags by default. */
export interface TlsFileNames {
  readonly cert: string;
  readonly key: string;
  readonly clientCa: string;
}

/** The flags that set the TLS files, as errors name them when no other names are given. */
export const TLS_FLAG_NAMES: TlsFileNames = {
  cert: "--tls-cert",
  key: "--tls-key",
  clientCa: "--tls-client-ca",
};

/** TlsCredentials are the contents of {@link TlsFiles}, checked to make a working listener. */
export interface TlsCredentials {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca?: Buffer;
}

/**
 * checkCertificates throws `<name>: <path>: <reason>` unless `pem` holds at least one PEM
 * certificate (`ifNone` finishes that message) and every one of them parses.
 */
function checkCertificates(pem: Buffer, path: string, name: string, ifNone: string): void {
  const blocks =
    pem.toString("utf8").match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ??
    [];
  if (blocks.length === 0) throw new Error(`${name}: ${path}: holds no PEM certificate${ifNone}`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new Error(
        `${name}: ${path}: a certificate in it does not parse (${(err as Error).message})`,
      );
    }
  }
}

/**
 * loadTlsCredentials reads the certificate chain, its private key and the client CA bundle, and
 * checks them the way a listener would use them: the certificate file holds at least one PEM
 * certificate, every one of which parses; the key is a PEM private key (unencrypted) matching
 * the first certificate; the CA bundle holds at least one PEM certificate and all of them
 * parse (Node would take an empty or garbled bundle and then refuse every client). A problem
 * throws an Error of the form `<name>: <path>: <reason in words>`, so a file that can never
 * work is refused before anything listens, and a bad replacement on reload never takes effect.
 */
export function loadTlsCredentials(
  files: TlsFiles,
  names: TlsFileNames = TLS_FLAG_NAMES,
): TlsCredentials {
  const cert = readConfigFile(files.certFile, names.cert);
  const key = readConfigFile(files.keyFile, names.key);
  checkCertificates(cert, files.certFile, names.cert, "");
  try {
    createSecureContext({ key });
  } catch (err) {
    throw new Error(
      `${names.key}: ${files.keyFile}: not an unencrypted PEM private key (${(err as Error).message})`,
    );
  }
  try {
    createSecureContext({ cert, key });
  } catch {
    throw new Error(
      `${names.key}: ${files.keyFile}: does not match the certificate in ${files.certFile}`,
    );
  }
  if (files.clientCaFile === undefined) return { cert, key };
  const ca = readConfigFile(files.clientCaFile, names.clientCa);
  checkCertificates(ca, files.clientCaFile, names.clientCa, ", so no client could connect");
  return { cert, key, ca };
}

/**
 * checkDataDir makes sure `root` can serve as the filesystem backend's data directory before
 * anything starts. An existing path must be a directory this process may read, write and
 * enter. A missing one is refused unless `create` is set, and even then its parent must be an
 * existing directory this process may write: a typo in a parent (`/var/lib/spilway/data`) is
 * refused rather than created. Problems throw an Error of the form `<name>: <path>: <reason in
 * words>`.
 */
export function checkDataDir(root: string, name: string, how: { readonly create: boolean }): void {
  let stat: ReturnType<typeof statSync> | undefined;
  try {
    stat = statSync(root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new Error(`${name}: ${root}: ${fsReason(err)}`);
    }
  }
  if (stat !== undefined) {
    if (!stat.isDirectory()) throw new Error(`${name}: ${root}: not a directory`);
    try {
      accessSync(root, constants.R_OK | constants.W_OK | constants.X_OK);
    } catch (err) {
      throw new Error(`${name}: ${root}: ${fsReason(err)}`);
    }
    return;
  }
  if (!how.create) throw new Error(`${name}: ${root}: does not exist`);
  const parent = dirname(root);
  let parentStat: ReturnType<typeof statSync>;
  try {
    parentStat = statSync(parent);
  } catch (err) {
    const reason =
      (err as NodeJS.ErrnoException).code === "ENOENT" ? "does not exist" : fsReason(err);
    throw new Error(
      `${name}: ${root}: its parent ${parent} ${reason}; create the parent, or fix the path`,
    );
  }
  if (!parentStat.isDirectory()) {
    throw new Error(`${name}: ${root}: its parent ${parent} is not a directory`);
  }
  try {
    accessSync(parent, constants.W_OK | constants.X_OK);
  } catch (err) {
    throw new Error(`${name}: ${root}: cannot be created in ${parent}: ${fsReason(err)}`);
  }
}
