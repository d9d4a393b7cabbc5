import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { hashToken, parseTokenFile, parseTokenLimit, TOKEN_LIMIT_ATTRIBUTES } from "./auth.js";
import { callWeights, defaultLimits } from "./limits.js";

/** The limit flags `token add` takes (`--max-blob-bytes`), by the token file attribute each writes. */
const LIMIT_FLAGS = new Map(TOKEN_LIMIT_ATTRIBUTES.map((a) => [a.replaceAll("_", "-"), a]));

/** TOKEN_USAGE is the help of `spillway token`. */
export const TOKEN_USAGE = `Usage: spillway token add <tenant> --token-file <path> [--max-blob-bytes <size>]
         [--max-run-bytes <size>] [--max-inflight-bytes <size>] [--max-calls <n>]

Prints a new random token (256 bits, base64url) once, and appends its SHA-256 with the tenant
and limits to the token file (SPILLWAY_TOKEN_FILE), creating the file with mode 0600. A running
server loads it on SIGHUP. A <size> is bytes, or a number and a unit (10GiB, 1.5MB), as serve's
flags take it; it is written in bytes.
`;

/** A bad command line: printed with TOKEN_USAGE, exit 2. */
interface TokenUsageError {
  readonly usageError: string;
}

function usage(message: string): TokenUsageError {
  return { usageError: message };
}

/**
 * runTokenCommand runs `spillway token <args>` and returns the exit status. `token add` makes
 * a new token from 32 random bytes (base64url, 43 characters), prints it on stdout (the only
 * time it is shown: the file holds its hash), and appends `<sha256 hex> <tenant> [limits]` to
 * the token file, creating it with mode 0600. The file as it would be afterwards is parsed
 * first with the server's own parser, so a tenant name or limits the server would refuse
 * (`server/src/auth.ts`) leave the file untouched and exit 2. A file that cannot be written
 * exits 1, naming the path.
 */
export function runTokenCommand(args: readonly string[]): number {
  try {
    const { values, positionals } = parseTokenArgs(args);
    if (values.help === true) {
      process.stdout.write(TOKEN_USAGE);
      return 0;
    }
    const [action, tenant, ...extra] = positionals;
    if (action !== "add") {
      throw usage(action === undefined ? "token: no action" : `token: unknown action "${action}"`);
    }
    if (tenant === undefined || extra.length > 0) {
      throw usage("token add: expected one <tenant>");
    }
    // The token file's fields are split on whitespace (the parser's \s+): a tenant holding some
    // would be read back as another tenant followed by attributes, e.g. a token for "carol".
    if (/\s/.test(tenant)) {
      throw usage(`token add: a tenant cannot contain whitespace, got ${JSON.stringify(tenant)}`);
    }
    const path = values["token-file"] ?? (process.env.SPILLWAY_TOKEN_FILE || undefined);
    if (path === undefined) {
      throw usage("token add: --token-file (or SPILLWAY_TOKEN_FILE) is required");
    }
    const limits: string[] = [];
    for (const [flag, attribute] of LIMIT_FLAGS) {
      const raw = (values as Record<string, string | boolean | undefined>)[flag];
      if (typeof raw !== "string") continue;
      try {
        limits.push(`${attribute}=${parseTokenLimit(attribute, raw)}`);
      } catch (err) {
        throw usage(`--${flag}: ${(err as Error).message}, got ${JSON.stringify(raw)}`);
      }
    }
    const token = randomBytes(32).toString("base64url");
    const line = [hashToken(token), tenant, ...limits].join(" ");
    const before = readExisting(path);
    const separator = before === "" || before.endsWith("\n") ? "" : "\n";
    try {
      // As a server with the default --inline-bytes reads it (one with a larger one refuses
      // less, and says so at start or SIGHUP).
      const weights = callWeights(defaultLimits);
      parseTokenFile(`${before}${separator}${line}\n`, {
        minInflightBytes: Math.max(weights.offload, weights.read),
      });
    } catch (err) {
      throw usage(`--token-file ${path}: ${(err as Error).message}`);
    }
    let fd: number;
    try {
      fd = openSync(path, "a", 0o600);
    } catch (err) {
      throw new Error(`--token-file ${path}: ${(err as Error).message}`);
    }
    try {
      writeSync(fd, `${separator}${line}\n`);
    } finally {
      closeSync(fd);
    }
    process.stdout.write(`${token}\n`);
    process.stderr.write(
      `spillway: added a token for tenant "${tenant}" to ${path}; it is shown only this once. A running server loads it on SIGHUP (kill -HUP <pid>).\n`,
    );
    return 0;
  } catch (err) {
    if (typeof err === "object" && err !== null && "usageError" in err) {
      process.stderr.write(`spillway: ${(err as TokenUsageError).usageError}\n${TOKEN_USAGE}`);
      return 2;
    }
    process.stderr.write(`spillway: ${(err as Error).message}\n`);
    return 1;
  }
}

function parseTokenArgs(args: readonly string[]) {
  try {
    return parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        "token-file": { type: "string" },
        ...Object.fromEntries([...LIMIT_FLAGS.keys()].map((f) => [f, { type: "string" as const }])),
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    throw usage((err as Error).message);
  }
}

/** The token file's text; "" when it does not exist yet. Anything but a file fails naming the path. */
function readExisting(path: string): string {
  if (!existsSync(path)) return "";
  try {
    if (!statSync(path).isFile()) throw new Error("not a regular file");
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`--token-file ${path}: ${(err as Error).message}`);
  }
}
