import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";

/** Bytes of SHA-256 a token keeps: enough that no edit or other run's token passes by chance. */
const digestBytes = 16;

const bindingOf = (tenant: string, runId: string, after: string) =>
  createHash("sha256")
    .update(JSON.stringify([tenant, runId, after]))
    .digest()
    .subarray(0, digestBytes)
    .toString("base64url");

/**
 * encodePageToken makes the ListToolOutputs page token that continues after the registry
 * cursor `after`, bound to the tenant and run it pages through: it carries the cursor and a
 * digest of (tenant, run, cursor), so any replica can check it without shared state.
 */
export function encodePageToken(tenant: string, runId: string, after: string): string {
  const token = { a: after, d: bindingOf(tenant, runId, after) };
  return Buffer.from(JSON.stringify(token), "utf8").toString("base64url");
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
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as {
      a?: unknown;
      d?: unknown;
    };
    if (
      typeof value.a === "string" &&
      !value.a.includes("/") &&
      value.d === bindingOf(tenant, runId, value.a)
    ) {
      return value.a;
    }
  } catch {
    // Fall through to the uniform error below.
  }
  throw new ConnectError(
    "page_token: not a token this server issued for this run; start again without one",
    Code.InvalidArgument,
  );
}

// Two elements where a ListToolOutputs binding has three, so no token passes for the other RPC.
const runsBindingOf = (tenant: string, after: string) =>
  createHash("sha256")
    .update(JSON.stringify([tenant, after]))
    .digest()
    .subarray(0, digestBytes)
    .toString("base64url");

/**
 * encodeRunsPageToken makes the ListRuns page token that continues after the stored run segment
 * `after`, bound to the tenant whose runs it pages through, the way encodePageToken binds a
 * ListToolOutputs token to its run; the two kinds never pass for each other.
 */
export function encodeRunsPageToken(tenant: string, after: string): string {
  const token = { a: after, d: runsBindingOf(tenant, after) };
  return Buffer.from(JSON.stringify(token), "utf8").toString("base64url");
}

/**
 * decodeRunsPageToken returns the cursor of a token encodeRunsPageToken made for this tenant,
 * undefined for an empty token, and INVALID_ARGUMENT (`page_token: …`) for anything else: a
 * token of another tenant, a ListToolOutputs token, an edited one, or one no server made.
 */
export function decodeRunsPageToken(tenant: string, token: string): string | undefined {
  if (token === "") return undefined;
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as {
      a?: unknown;
      d?: unknown;
    };
    if (
      typeof value.a === "string" &&
      value.a !== "" &&
      !value.a.includes("/") &&
      value.d === runsBindingOf(tenant, value.a)
    ) {
      return value.a;
    }
  } catch {
    // Fall through to the uniform error below.
  }
  throw new ConnectError(
    "page_token: not a token this server issued for this tenant's runs; start again without one",
    Code.InvalidArgument,
  );
}
