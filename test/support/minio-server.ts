import { access, constants, mkdir, mkdtemp, readFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { freePorts } from "./free-port.js";
import type { ObjectServer } from "./object-server.js";
import { writeSelfSigned } from "./self-signed.js";
import { launchObjectServer } from "./server-process.js";

/**
 * minioBinaryPath is where scripts/install-object-servers.sh puts the pinned MinIO build:
 * `${SPILLWAY_CACHE:-$HOME/.cache/spillway}/bin/minio`.
 */
export function minioBinaryPath(): string {
  const cache = process.env.SPILLWAY_CACHE ?? join(homedir(), ".cache", "spillway");
  return join(cache, "bin", "minio");
}

/**
 * startMinioServer runs the cached MinIO binary on free loopback ports (S3 API and console)
 * with a private data dir, and resolves once it answers an authenticated ListBuckets (the
 * default probe): /minio/health/live answers 200 before MinIO's object layer is initialized, and
 * S3 calls made then fail with XMinioServerNotInitialized. It fails, never skips, when the binary
 * is missing. With `tls`, it serves HTTPS under a fresh self-signed certificate for 127.0.0.1
 * (made with `openssl`), whose PEM the returned info carries as `ca` and writes to `caFile`.
 * `env` adds MinIO settings (`MINIO_API_*`, ...) to its environment.
 */
export async function startMinioServer(
  opts: { tls?: boolean; env?: Record<string, string> } = {},
): Promise<ObjectServer> {
  const binary = minioBinaryPath();
  try {
    await access(binary, constants.X_OK);
  } catch {
    throw new ConnectError(
      `minio binary not found at ${binary}; run: bash scripts/install-object-servers.sh`,
      Code.FailedPrecondition,
    );
  }
  const [port, consolePort] = await freePorts(2);
  const dir = await mkdtemp(join(tmpdir(), "spillway-minio-"));
  const data = join(dir, "data");
  await mkdir(data);
  const certs = join(dir, "certs");
  if (opts.tls === true) {
    await mkdir(certs);
    writeSelfSigned({
      certFile: join(certs, "public.crt"),
      keyFile: join(certs, "private.key"),
      commonName: "127.0.0.1",
      altNames: ["IP:127.0.0.1"],
    });
  }
  const endpoint = `${opts.tls === true ? "https" : "http"}://127.0.0.1:${port}`;
  const accessKeyId = "spillway-test";
  const secretAccessKey = "spillway-test-secret";
  const caFile = join(certs, "public.crt");
  return launchObjectServer({
    kind: "minio",
    endpoint,
    ...(opts.tls === true ? { ca: await readFile(caFile, "utf8"), caFile } : {}),
    region: "us-east-1",
    accessKeyId,
    secretAccessKey,
    dir,
    command: binary,
    args: [
      "server",
      data,
      "--address",
      `127.0.0.1:${port}`,
      "--console-address",
      `127.0.0.1:${consolePort}`,
      "--quiet",
      ...(opts.tls === true ? ["--certs-dir", certs] : []),
    ],
    env: {
      MINIO_ROOT_USER: accessKeyId,
      MINIO_ROOT_PASSWORD: secretAccessKey,
      MINIO_UPDATE: "off",
      ...opts.env,
    },
    readyTimeoutMs: 60_000,
  });
}
