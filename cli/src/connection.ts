import { readFileSync } from "node:fs";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { type ParsedCommandLine, stringFlag } from "./command-line.js";
import { usageError } from "./exit-codes.js";

/** DEFAULT_URL is the server a command talks to without `--url` or `SPILLWAY_URL`. */
const DEFAULT_URL = "http://127.0.0.1:50051";

/** Connection is where and as whom the CLI calls the server. */
export interface Connection {
  /** `--url`, else `SPILLWAY_URL`, else DEFAULT_URL. */
  readonly url: string;
  /** `--token`, else the first line of `--token-file`, else `SPILLWAY_TOKEN`; none in dev mode. */
  readonly token: string | undefined;
  /** PEM files from `--tls-ca` (or `SPILLWAY_TLS_CA`), `--tls-cert` and `--tls-key`. */
  readonly tls: { ca?: Buffer; cert?: Buffer; key?: Buffer };
}

function readFlagFile(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw usageError(`--${flag} ${path}: ${(err as Error).message}`);
  }
}

/**
 * connectionOf reads the global flags over the environment. A URL that is not http(s), an
 * unreadable file named by a flag, a token given twice, or half an mTLS identity is a
 * UsageError naming the flag.
 */
export function connectionOf(
  values: ParsedCommandLine["values"],
  env: NodeJS.ProcessEnv,
): Connection {
  const flagToken = stringFlag(values, "token");
  const tokenFile = stringFlag(values, "token-file");
  if (flagToken !== undefined && tokenFile !== undefined) {
    throw usageError("--token and --token-file: give one");
  }
  const token =
    flagToken ??
    (tokenFile === undefined
      ? env.SPILLWAY_TOKEN || undefined
      : readFlagFile("token-file", tokenFile).toString("utf8").split("\n")[0]?.trim() || undefined);
  const caFile = stringFlag(values, "tls-ca") ?? (env.SPILLWAY_TLS_CA || undefined);
  const certFile = stringFlag(values, "tls-cert");
  const keyFile = stringFlag(values, "tls-key");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw usageError("--tls-cert and --tls-key go together");
  }
  return {
    url: checkedUrl(stringFlag(values, "url") ?? (env.SPILLWAY_URL || DEFAULT_URL)),
    token,
    tls: {
      ...(caFile === undefined ? {} : { ca: readFlagFile("tls-ca", caFile) }),
      ...(certFile === undefined ? {} : { cert: readFlagFile("tls-cert", certFile) }),
      ...(keyFile === undefined ? {} : { key: readFlagFile("tls-key", keyFile) }),
    },
  };
}

/** checkedUrl returns `url` when it is an http:// or https:// URL; a UsageError otherwise. */
function checkedUrl(url: string): string {
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {
    // Not a URL at all: refused below with the same message.
  }
  if (protocol !== "http:" && protocol !== "https:") {
    throw usageError(
      `--url (or SPILLWAY_URL): expected http://host:port or https://host:port, got ${JSON.stringify(url)}`,
    );
  }
  return url;
}

/**
 * clientOf builds the SDK client for a connection. Its byte reads (`cat`, `head -c`, `tail -c`)
 * go over HTTP/1.1 where the server answers it (nearer the disk's speed; see the SDK's
 * bulkReads), every other call over HTTP/2.
 */
export function clientOf(connection: Connection): SpillwayClient {
  return createSpillwayClient({
    baseUrl: connection.url,
    bulkReads: "http1",
    ...(connection.token === undefined ? {} : { token: connection.token }),
    tls: connection.tls,
  });
}
