import { Code, ConnectError } from "@connectrpc/connect";
import { startMinioServer } from "./minio-server.js";
import { startMotoServer } from "./moto-server.js";
import { startSeaweedfsServer } from "./seaweedfs-server.js";

export { freePort } from "./free-port.js";
export { type Probe, waitFor } from "./wait-for.js";

/** ObjectServerKind names the S3-compatible servers the tests start for real. */
export type ObjectServerKind = "minio" | "seaweedfs" | "moto";

/** objectServerKinds lists every ObjectServerKind, in a stable order. */
export const objectServerKinds: readonly ObjectServerKind[] = ["minio", "seaweedfs", "moto"];

/**
 * ObjectServerInfo is what a client needs to reach a running server: plain data, so vitest's
 * globalSetup can `provide` it to test files.
 */
export interface ObjectServerInfo {
  kind: ObjectServerKind;
  /**
   * Loopback base URL, `http://127.0.0.1:<port>` (`https://` for a server started with TLS);
   * use it with path-style addressing.
   */
  endpoint: string;
  /** PEM of the certificate a TLS server presents, for clients to trust; absent without TLS. */
  ca?: string;
  /** The same PEM as a file, for `NODE_EXTRA_CA_CERTS`; absent without TLS. */
  caFile?: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

/** ObjectServer is a real S3-compatible server process on loopback, owned by the caller. */
export interface ObjectServer extends ObjectServerInfo {
  /** stop kills the process (SIGTERM, then SIGKILL after 5 s) and deletes its data; idempotent. */
  stop(): Promise<void>;
  /** restart stops the process if it runs, then starts it again on the same port and data dir. */
  restart(): Promise<void>;
  /** pause stops the process but keeps port and data so a later restart() brings it back. */
  pause(): Promise<void>;
  /** pid is the running process's id (for its /proc entries); undefined while stopped or paused. */
  pid(): number | undefined;
}

/**
 * conditionalWriteSupport records, per server, whether PutObject with `If-None-Match: *` is
 * honoured (a second put to an existing key fails with 412). test/object-servers.test.ts
 * asserts every entry against the live server, so a change in behaviour fails the suite.
 */
export const conditionalWriteSupport: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: true,
  moto: true,
};

/**
 * Whether a server checks request signatures: moto accepts any credentials, so on moto a
 * wrong secret is documented to succeed.
 */
export const signatureCheckSupport: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: true,
  moto: false,
};

/**
 * Whether a server checks a body against the CRC32 the request carries
 * (`x-amz-checksum-crc32`) and refuses a mismatch: moto stores the body unchecked.
 */
export const bodyChecksumSupport: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: true,
  moto: false,
};

/**
 * Whether a server reports a missing bucket on PutObject and ListObjectsV2: SeaweedFS (with an
 * admin identity) either creates the bucket on the first put or fails the put with a 500, and
 * lists a missing bucket as empty. Every server reports NoSuchBucket on GetObject.
 */
export const missingBucketReportedOnWrite: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: false,
  moto: true,
};

/**
 * Whether a server's conditional CompleteMultipartUpload is atomic: moto checks and writes
 * without a lock, and SeaweedFS 4.48 was seen letting both of two racing completions succeed
 * (a CI run on 2026-11-30), so on those two the later completion may win; the stored bytes
 * are still one writer's, which server/backends/s3.test.ts asserts everywhere.
 */
export const atomicConditionalComplete: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: false,
  moto: false,
};

/**
 * Whether a server keeps an HTTP/1.1 connection open for the client's next request: moto's
 * server closes each connection after its answer, so every request there opens a new one.
 * server/backends/s3.test.ts asserts every entry against the live server.
 */
export const keepsConnectionsOpen: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: true,
  moto: false,
};

/**
 * Whether ListObjectsV2 returns keys in byte order: SeaweedFS walks its directory tree, so
 * `a/x` sorts before `a-c` and `a.b` (a `/` sorts lowest), so the contract suite is told so
 * (ContractDifferences) and test/object-servers.test.ts asserts it against the live server.
 */
export const listsInByteOrder: Readonly<Record<ObjectServerKind, boolean>> = {
  minio: true,
  seaweedfs: false,
  moto: true,
};

/**
 * startObjectServer starts a fresh server of `kind` on free loopback ports with its own temp
 * data dir and resolves once it serves S3 requests. The caller must `stop()` it.
 */
export async function startObjectServer(kind: ObjectServerKind): Promise<ObjectServer> {
  // A free port can be taken by another process between probing and binding; such a start
  // is retried on fresh ports rather than failed.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(kind);
    } catch (err) {
      const portTaken = /in use|EADDRINUSE|bind: address/i.test(ConnectError.from(err).rawMessage);
      if (!portTaken || attempt >= 3) throw err;
    }
  }
}

function startOnce(kind: ObjectServerKind): Promise<ObjectServer> {
  switch (kind) {
    case "minio":
      return startMinioServer();
    case "seaweedfs":
      return startSeaweedfsServer();
    case "moto":
      return startMotoServer();
    default:
      throw new ConnectError(`unknown object server kind: ${String(kind)}`, Code.InvalidArgument);
  }
}
