import { access, constants, mkdir, mkdtemp } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { freePorts } from "./free-port.js";
import type { ObjectServer } from "./object-server.js";
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
 * is missing.
 */
export async function startMinioServer(): Promise<ObjectServer> {
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
  const endpoint = `http://127.0.0.1:${port}`;
  const accessKeyId = "spillway-test";
  const secretAccessKey = "spillway-test-secret";
  return launchObjectServer({
    kind: "minio",
    endpoint,
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
    ],
    env: {
      MINIO_ROOT_USER: accessKeyId,
      MINIO_ROOT_PASSWORD: secretAccessKey,
      MINIO_UPDATE: "off",
    },
    readyTimeoutMs: 60_000,
  });
}
