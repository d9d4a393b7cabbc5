import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { isStoredRunSegment } from "./keys.js";

/** Bytes of SHA-256 a token keeps: enough that no edit or other run's token passes by chance. */
const digestBytes = 16;

// A ListToolOutputs token binds [tenant, run, cursor] and a ListRuns one [tenant, cursor]: the
// element counts differ, so neither kind passes for the other.
const bindingOf = (scope: readonly string[], after: string) =>
  createHash("sha256")
    .update(JSON.stringify([...scope, after]))
    .digest()
    .subarray(0, digestBytes)
    .toString("base64url");

/** The token carrying cursor `after` and its digest bound to `scope`. */
const encodeToken = (scope: readonly string[], after: string) =>
  Buffer.from(JSON.stringify({ a: after, d: bindingOf(scope, after) }), "utf8").toString(
    "base64url",
  );

/**
 * The JSON a token carries, read only from the exact text encode* made: Node's base64url
 * decoder skips characters outside its alphabet (a control character inserted into a real token
 * would pass) and ignores trailing bits, so the text must be the alphabet and re-encode to itself.
 */
function parseToken(token: string): { a?: unknown; d?: unknown } {
  if (!/^[A-Za-z0-9_-]+$/.test(token)) return {};
  const bytes = Buffer.from(token, "base64url");
  if (bytes.toString("base64url") !== token) return {};
  return JSON.parse(bytes.toString("utf8")) as { a?: unknown; d?: unknown };
}

/**
 * The cursor of a token encodeToken made for `scope`, if it is one and `accepts` the cursor;
 * otherwise INVALID_ARGUMENT with `message`.
 */
function decodeToken(
  scope: readonly string[],
  token: string,
  accepts: (cursor: string) => boolean,
  message: string,
): string {
  try {
    const value = parseToken(token);
    if (typeof value.a === "string" && accepts(value.a) && value.d === bindingOf(scope, value.a)) {
      return value.a;
    }
  } catch {
    // Fall through to the uniform error below.
  }
  throw new ConnectError(message, Code.InvalidArgument);
}

/**
 * encodePageToken makes the ListToolOutputs page token that continues after the registry
 * cursor `after`, bound to the tenant and run it pages through: it carries the cursor and a
 * digest of (tenant, run, cursor), so any replica can check it without shared state.
 */
export function encodePageToken(tenant: string, runId: string, after: string): string {
  return encodeToken([tenant, runId], after);
}

/**
 * decodePageToken returns the cursor of a token encodePageToken made for this tenant and run,
 * undefined for an empty token (the first page), and INVALID_ARGUMENT (`page_token: …`) for
 * anything else: a token of another run or tenant, an edited one, or one no server made.
 *
 * The digest is not keyed: it tells tokens apart, it does not hide them. A caller who forges
 * one for its own run only moves a cursor within that run, whose records it may list anyway.
 */
export function decodePageToken(tenant: string, runId: string, token: string): string | undefined {
  if (token === "") return undefined;
  return decodeToken(
    [tenant, runId],
    token,
    (cursor) => !cursor.includes("/"),
    "page_token: not a token this server issued for this run; start again without one",
  );
}

/**
 * encodeRunsPageToken makes the ListRuns page token that continues after the stored run segment
 * `after`, bound to the tenant whose runs it pages through, the way encodePageToken binds a
 * ListToolOutputs token to its run; the two kinds never pass for each other.
 */
export function encodeRunsPageToken(tenant: string, after: string): string {
  return encodeToken([tenant], after);
}

/**
 * decodeRunsPageToken returns the cursor of a token encodeRunsPageToken made for this tenant,
 * undefined for an empty token, and INVALID_ARGUMENT (`page_token: …`) for anything else: a
 * token of another tenant, a ListToolOutputs token, an edited one, or one no server made. A
 * cursor it returns is always a segment runPrefix could have made (isStoredRunSegment).
 */
export function decodeRunsPageToken(tenant: string, token: string): string | undefined {
  if (token === "") return undefined;
  return decodeToken(
    [tenant],
    token,
    isStoredRunSegment,
    "page_token: not a token this server issued for this tenant's runs; start again without one",
  );
}
