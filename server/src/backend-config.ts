import { resolve } from "node:path";
import type { Backend } from "./backends/backend.js";
import { checkDataDir } from "./config-files.js";

/** BACKEND_FLAGS are the CLI flags that choose and configure a backend, with their env vars. */
export const BACKEND_FLAGS = {
  backend: "SPILLWAY_BACKEND",
  "data-dir": "SPILLWAY_DATA_DIR",
  "s3-bucket": "SPILLWAY_S3_BUCKET",
  "s3-prefix": "SPILLWAY_S3_PREFIX",
  "s3-endpoint": "SPILLWAY_S3_ENDPOINT",
  "s3-region": "SPILLWAY_S3_REGION",
  "s3-path-style": "SPILLWAY_S3_PATH_STYLE",
  "s3-sign-payload": "SPILLWAY_S3_SIGN_PAYLOAD",
} as const;

/** The flags only the object-store backends (s3, minio) read. */
const objectStoreFlags = [
  "s3-bucket",
  "s3-prefix",
  "s3-endpoint",
  "s3-region",
  "s3-path-style",
  "s3-sign-payload",
] as const;

/** BACKEND_USAGE documents BACKEND_FLAGS for `spillway --help`. */
export const BACKEND_USAGE = `  --backend <memory|filesystem|s3|minio>   SPILLWAY_BACKEND     default filesystem
  --data-dir <path>               SPILLWAY_DATA_DIR     default ./data (filesystem backend)
  --s3-bucket <name>              SPILLWAY_S3_BUCKET    bucket (s3 and minio backends)
  --s3-prefix <prefix>            SPILLWAY_S3_PREFIX    key prefix inside the bucket
  --s3-endpoint <url>             SPILLWAY_S3_ENDPOINT  e.g. http://127.0.0.1:9000 (S3-compatible)
  --s3-region <region>            SPILLWAY_S3_REGION    default us-east-1
  --s3-path-style <true|false>    SPILLWAY_S3_PATH_STYLE  path-style URLs, default true with an endpoint
  --s3-sign-payload <true|false>  SPILLWAY_S3_SIGN_PAYLOAD  sign a sha256 of every body (s3 backend),
                                  default false: bodies are checked by a signed CRC32
  Credentials come from the standard chain: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles,
  instance roles (s3); the same two variables for the minio backend.
`;

/** booleanOption reads a `true`/`false` flag; anything else is an Error naming the flag. */
function booleanOption(value: string | undefined, flag: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === "true" || value === "false") return value === "true";
  throw new Error(`--${flag} must be true or false, got "${value}"`);
}

/**
 * checkEndpoint refuses an object-store endpoint that is not an http:// or https:// URL,
 * naming the flag: the S3 client took `not a url` or `localhost:9000` and the server started
 * with health NOT_SERVING, its store unreachable for a reason no log line named as the flag.
 */
function checkEndpoint(endpoint: string, name: string): void {
  let protocol: string | undefined;
  try {
    protocol = new URL(endpoint).protocol;
  } catch {
    protocol = undefined;
  }
  if (protocol !== "http:" && protocol !== "https:") {
    throw new Error(
      `${name}: expected an http:// or https:// URL such as http://127.0.0.1:9000, got ${JSON.stringify(endpoint)}`,
    );
  }
}

/** ConfiguredBackend is a backend built from flags (its `sweepLeftovers`, if any, included). */
export interface ConfiguredBackend {
  readonly backend: Backend;
  readonly kind: string;
}

/**
 * backendFromOptions builds the backend the flags name. Every problem is reported as an
 * Error naming the flag, before the server binds its port. Only the chosen backend's module is
 * loaded: the object-store SDKs add some 40 MiB to a filesystem replica that never uses them.
 * An empty --data-dir is refused, and so is one that is not a directory this process may read,
 * write and enter (checkDataDir); with `createDataDir: false` (a one-off sweep) so is one that
 * does not exist, and otherwise one whose parent does not exist. The filesystem backend would
 * create either, all the way down, so a typo would serve or sweep a fresh empty store.
 */
export async function backendFromOptions(
  opt: (flag: keyof typeof BACKEND_FLAGS) => string | undefined,
  how: {
    readonly createDataDir?: boolean;
    /** How errors name a flag: `--flag`, or `--flag (VARIABLE)` when set from the environment. */
    readonly name?: (flag: keyof typeof BACKEND_FLAGS) => string;
    /**
     * Whether a flag was given on the command line: one there that the chosen backend does not
     * read is refused (`--s3-bucket` with the default filesystem backend served ./data, the
     * bucket silently ignored); a variable of the environment may be shared, and is not.
     */
    readonly given?: (flag: keyof typeof BACKEND_FLAGS) => boolean;
  } = {},
): Promise<ConfiguredBackend> {
  const kind = opt("backend") ?? "filesystem";
  const unread = (
    kind === "s3" || kind === "minio"
      ? ["data-dir"]
      : ["data-dir", ...objectStoreFlags].filter((f) => f !== "data-dir" || kind === "memory")
  ) as (keyof typeof BACKEND_FLAGS)[];
  const misplaced = unread.find((flag) => how.given?.(flag) === true);
  if (misplaced !== undefined) {
    throw new Error(
      `--${misplaced} does not apply to --backend ${kind}${opt("backend") === undefined ? " (the default)" : ""}: ${misplaced === "data-dir" ? "it is the filesystem backend's" : "it is the s3 and minio backends'"}`,
    );
  }
  switch (kind) {
    case "memory": {
      const { createMemoryBackend } = await import("./backends/memory.js");
      return { kind, backend: createMemoryBackend() };
    }
    case "filesystem": {
      const given = opt("data-dir");
      const dataDir = given ?? "data";
      // resolve("") is the working directory, which would become the data root (and 0700).
      if (dataDir.trim() === "") {
        throw new Error("--data-dir (SPILLWAY_DATA_DIR): empty; name the data directory");
      }
      const root = resolve(dataDir);
      checkDataDir(
        root,
        given === undefined
          ? "--data-dir (default ./data)"
          : (how.name?.("data-dir") ?? "--data-dir"),
        { create: how.createDataDir !== false },
      );
      const { createFilesystemBackend } = await import("./backends/filesystem.js");
      return { kind, backend: createFilesystemBackend({ root }) };
    }
    case "s3":
    case "minio": {
      const bucket = opt("s3-bucket");
      if (bucket === undefined || bucket === "") {
        throw new Error(`--s3-bucket is required with --backend ${kind}`);
      }
      const endpoint = opt("s3-endpoint");
      if (endpoint !== undefined)
        checkEndpoint(endpoint, how.name?.("s3-endpoint") ?? "--s3-endpoint");
      const region = opt("s3-region") ?? "us-east-1";
      const prefix = opt("s3-prefix") ?? "";
      const signPayload = booleanOption(opt("s3-sign-payload"), "s3-sign-payload");
      if (kind === "s3") {
        const { createS3Backend } = await import("./backends/s3.js");
        const pathStyle = booleanOption(opt("s3-path-style"), "s3-path-style");
        return {
          kind,
          backend: createS3Backend({
            bucket,
            prefix,
            region,
            ...(endpoint === undefined ? {} : { endpoint }),
            forcePathStyle: pathStyle ?? endpoint !== undefined,
            ...(signPayload === undefined ? {} : { signPayload }),
          }),
        };
      }
      if (signPayload !== undefined) {
        // The minio client decides by itself: it signs bodies over http, not over https.
        throw new Error("--s3-sign-payload applies to --backend s3 only");
      }
      if (endpoint === undefined) {
        throw new Error("--s3-endpoint is required with --backend minio");
      }
      const { createMinioBackend } = await import("./backends/minio.js");
      const url = new URL(endpoint);
      const useSSL = url.protocol === "https:";
      return {
        kind,
        backend: createMinioBackend({
          endPoint: url.hostname,
          port: url.port === "" ? (useSSL ? 443 : 80) : Number(url.port),
          useSSL,
          bucket,
          prefix,
          region,
        }),
      };
    }
    default:
      throw new Error(`--backend: unknown backend "${kind}" (memory, filesystem, s3, minio)`);
  }
}
