import { execFileSync } from "node:child_process";

/** SelfSignedFiles names where writeSelfSigned puts a certificate and its key, and for whom. */
export interface SelfSignedFiles {
  /** PEM certificate to write. */
  readonly certFile: string;
  /** PEM private key to write (unencrypted). */
  readonly keyFile: string;
  /** The certificate's common name. */
  readonly commonName: string;
  /** subjectAltName entries, e.g. `["DNS:localhost", "IP:127.0.0.1"]`; none by default. */
  readonly altNames?: readonly string[];
}

/**
 * writeSelfSigned writes a fresh self-signed P-256 certificate, valid for one day, and its key,
 * with the `openssl` command line (the tests' one certificate maker).
 */
export function writeSelfSigned(files: SelfSignedFiles): void {
  const altNames = files.altNames ?? [];
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "1",
      "-subj",
      `/CN=${files.commonName}`,
      "-keyout",
      files.keyFile,
      "-out",
      files.certFile,
      ...(altNames.length === 0 ? [] : ["-addext", `subjectAltName=${altNames.join(",")}`]),
    ],
    { stdio: "ignore" },
  );
}
