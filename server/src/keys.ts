import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * The longest segment a storage key carries. Encoding can triple a segment's length, and
 * stores bound names (255 bytes per file name, 1,024 bytes per S3 key), so longer segments
 * are replaced by a digest.
 */
const MAX_STORED_SEGMENT = 200;

/**
 * encodeSegment maps any string to a storage-safe path segment, injectively.
 *
 * Every byte outside `[A-Za-z0-9_-]` becomes `%XX` (uppercase hex of its UTF-8 bytes), so the
 * result never contains `/`, `\`, `.`, `~` or NUL, can never be `.` or `..`, and two different
 * inputs never encode to the same segment. The service joins a call id and a slot with a
 * literal `.`, which therefore cannot collide with a `.` inside either of them.
 */
export function encodeSegment(value: string): string {
  let out = "";
  for (const byte of Buffer.from(value, "utf8")) {
    const safe =
      (byte >= 0x30 && byte <= 0x39) ||
      (byte >= 0x41 && byte <= 0x5a) ||
      (byte >= 0x61 && byte <= 0x7a) ||
      byte === 0x5f ||
      byte === 0x2d;
    out += safe
      ? String.fromCharCode(byte)
      : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** decodeSegment inverts encodeSegment. */
export function decodeSegment(segment: string): string {
  return decodeURIComponent(segment);
}

/**
 * storedSegment is the segment a storage key holds for an already encoded value: the value
 * itself, or `~` and its SHA-256 when it is longer than any store accepts. `~` never occurs in
 * encoded values, so digests cannot collide with short segments, and every key stays well
 * under every store's limits (three segments of at most 200 characters plus fixed parts).
 */
export function storedSegment(encoded: string): string {
  return encoded.length <= MAX_STORED_SEGMENT
    ? encoded
    : `~${createHash("sha256").update(encoded).digest("hex")}`;
}

const segment = (value: string) => storedSegment(encodeSegment(value));

/**
 * checkSlotPath refuses `file:` slots whose path is not a clean relative path.
 *
 * The slot is encoded before it reaches storage, so this is not what keeps bytes inside the
 * root; it keeps the recorded names honest (`file:../../etc/passwd` is never a real output).
 */
export function checkSlotPath(slot: string): void {
  if (!slot.startsWith("file:")) return;
  const path = slot.slice("file:".length);
  const parts = path.split("/");
  if (path.startsWith("/") || parts.some((p) => p === "" || p === "." || p === "..")) {
    throw new ConnectError(
      `header.slot: "${truncateForMessage(slot)}" must name a relative path without empty, "." or ".." parts`,
      Code.InvalidArgument,
    );
  }
}

/** The highest attempt number a key may carry (BlobKey.attempt). */
const MAX_ATTEMPT = 1000;

/**
 * HandleKey is what a handle names inside its run: a call, for an attachment its slot, and
 * for a retry its attempt (2 and up; absent for the first attempt, which 0 and 1 both name).
 */
export interface HandleKey {
  readonly callId: string;
  readonly slot?: string;
  readonly attempt?: number;
}

/**
 * attemptOf normalizes BlobKey.attempt: 0 (unset) and 1 are the first attempt, returned as 1.
 * Anything outside 0..MAX_ATTEMPT is INVALID_ARGUMENT (the proto's rule, checked again here
 * because a key must never carry an attempt its handle cannot name).
 */
export function attemptOf(attempt: number | undefined): number {
  const n = attempt ?? 0;
  if (!Number.isInteger(n) || n < 0 || n > MAX_ATTEMPT) {
    throw new ConnectError(
      `header.key.attempt: ${n} is outside 0..${MAX_ATTEMPT}`,
      Code.InvalidArgument,
    );
  }
  return Math.max(n, 1);
}

/**
 * handleFor returns the model-facing handle of a call's result (`res_<call_id>`) or one of its
 * attachments (`out_<call_id>_<slot>`); a retry (attempt n >= 2) is `res@<n>_<call_id>` or
 * `out@<n>_<call_id>_<slot>`, n in decimal without leading zeros. Attempts 0, 1 and undefined
 * all name the first attempt, whose handle is the one a key without an attempt always had.
 *
 * The mapping is injective: in the slot part `%` becomes `%25` and `_` becomes `%5F`, so that
 * part never contains `_` and an attachment handle splits at its last `_` (call ids keep every
 * `_`, as provider ids like `call_abc_123` need). Slots without `_` or `%` (`stdout`, `stderr`,
 * `value` and most file paths) read exactly as they always did. A first attempt's handle starts
 * `res_` or `out_`, a retry's `res@` or `out@`, so no retry shares a handle with a first
 * attempt, and the attempt ends at the first `_` after the `@`. parseHandle inverts it.
 */
export function handleFor(callId: string, slot: string | undefined, attempt?: number): string {
  const n = attempt === undefined || attempt <= 1 ? "" : `@${attempt}`;
  return slot === undefined ? `res${n}_${callId}` : `out${n}_${callId}_${encodeSlot(slot)}`;
}

/** `res@<n>_` / `out@<n>_` of a retry's handle, n in 2..1000 without leading zeros. */
const ATTEMPT_PREFIX = /^(res|out)@([1-9][0-9]{0,3})_/;

/**
 * parseHandle returns the call, slot and attempt a handle was made for by handleFor, or
 * undefined when handleFor makes no such handle (so `handleFor(parseHandle(h)) === h` whenever
 * it is defined). Retry handles with attempt 0 or 1, a leading zero, no digits, digits not
 * followed by `_`, or an attempt over 1000 are not handles (`res@1_x`, `res@01_x`,
 * `res@1001_x`, `res@_x`, `res@2x_y`). It describes a handle; it never replaces resolving one
 * through its run's registry.
 */
export function parseHandle(handle: string): HandleKey | undefined {
  if (handle.startsWith("res@") || handle.startsWith("out@")) {
    const match = ATTEMPT_PREFIX.exec(handle);
    const attempt = match === null ? 0 : Number(match[2]);
    if (match === null || attempt < 2 || attempt > MAX_ATTEMPT) return undefined;
    const first = parseHandle(`${match[1]}_${handle.slice(match[0].length)}`);
    return first === undefined ? undefined : { ...first, attempt };
  }
  if (handle.startsWith("res_")) {
    const callId = handle.slice("res_".length);
    return callId === "" ? undefined : { callId };
  }
  if (!handle.startsWith("out_")) return undefined;
  const split = handle.lastIndexOf("_");
  const callId = handle.slice("out_".length, split);
  const encoded = handle.slice(split + 1);
  if (split < "out_".length || callId === "" || encoded === "") return undefined;
  const slot = encoded.replace(/%(25|5F)/g, (code) => (code === "%25" ? "%" : "_"));
  return encodeSlot(slot) === encoded ? { callId, slot } : undefined;
}

/**
 * isRetryHandle tells whether a handle is written in a retry's form (`res@…` or `out@…`),
 * well-formed or not: no first attempt's handle and no handle made before attempts existed
 * has that form, so one parseHandle refuses names no record.
 */
export function isRetryHandle(handle: string): boolean {
  return handle.startsWith("res@") || handle.startsWith("out@");
}

/**
 * ATTEMPT_MARK joins an attempt number to a stored segment. It sorts before every character an
 * encoded segment or a digest holds (`%`, `-`, `0-9`, `A-Z`, `_`, `a-z`, `~`) and none of them
 * is `!`, so `<segment>!<nnnn>` can neither equal another key's segment nor sort between a
 * segment and its own retries.
 */
const ATTEMPT_MARK = "!";

/** The attempt suffix of a retry's stored segment: `!` and four digits, empty for the first. */
function attemptSuffix(attempt: number | undefined): string {
  return attempt === undefined || attempt <= 1
    ? ""
    : `${ATTEMPT_MARK}${String(attempt).padStart(4, "0")}`;
}

/**
 * recordSegment is the last segment of a handle's registry key. A first attempt's is its
 * encoded handle (digested when long), exactly as before attempts existed. A retry's is the
 * first attempt's segment followed by `!` and the attempt in four digits (`res_x!0002` for
 * `res@2_x`): `!` occurs in no encoded segment or digest, so no two handles share a segment,
 * and since it sorts before all of their characters and the digits are padded, a listing in
 * key order shows each output's attempts together, first attempt first, in attempt order.
 * A retry-form handle parseHandle refuses keeps its plain encoding, where no record is ever
 * written (`@` is always encoded, and only parsed retry handles are committed).
 */
export function recordSegment(handle: string): string {
  const key = isRetryHandle(handle) ? parseHandle(handle) : undefined;
  if (key === undefined) return segment(handle);
  return segment(handleFor(key.callId, key.slot)) + attemptSuffix(key.attempt);
}

/**
 * recordNameOfKey names the output a registry key holds, for messages: its handle (with the
 * attempt, for a retry's record), or "an output with a long handle" when the key holds a
 * digest, which cannot be turned back.
 */
export function recordNameOfKey(key: string): string {
  const last = key.slice(key.lastIndexOf("/") + 1);
  if (last.startsWith("~")) return "an output with a long handle";
  const [encoded = "", attempt] = last.split(ATTEMPT_MARK);
  let handle: string;
  try {
    handle = decodeSegment(encoded);
  } catch {
    handle = encoded;
  }
  const name = `"${truncateForMessage(handle)}"`;
  return attempt === undefined ? name : `${name} attempt ${Number(attempt)}`;
}

const encodeSlot = (slot: string) => slot.replace(/[%_]/g, (c) => (c === "%" ? "%25" : "%5F"));

/** runPrefix is the storage prefix that holds everything of one run. */
export function runPrefix(tenant: string, runId: string): string {
  return `t/${segment(tenant)}/r/${segment(runId)}/`;
}

/** tenantPrefix is the storage prefix that holds everything of one tenant. */
export function tenantPrefix(tenant: string): string {
  return `t/${segment(tenant)}/`;
}

/**
 * tenantRunsPrefix is the storage prefix under which each of a tenant's runs has its own
 * prefix, `<tenantRunsPrefix><stored run segment>/` (runPrefix).
 */
export function tenantRunsPrefix(tenant: string): string {
  return `${tenantPrefix(tenant)}r/`;
}

/**
 * isStoredRunSegment tells whether runPrefix could have made `segment` for some run id: an
 * encoded id of at most the stored length, or `~` and a SHA-256 in hex.
 */
export function isStoredRunSegment(segment: string): boolean {
  return (
    (segment.length > 0 &&
      segment.length <= MAX_STORED_SEGMENT &&
      /^(?:[A-Za-z0-9_-]|%[0-9A-F]{2})+$/.test(segment)) ||
    /^~[0-9a-f]{64}$/.test(segment)
  );
}

/** What follows a run's prefix in the keys of its handle records (registryPrefix). */
export const runRegistrySuffix = "h/";
/** What follows a run's prefix in the key of its metadata object (runMetaKey). */
export const runMetaSuffix = "meta";
/** What follows a run's prefix in the key of its TTL object (runTtlKey). */
export const runTtlSuffix = "ttl";

/** registryPrefix is where a run's handle records live, one object per handle. */
export function registryPrefix(tenant: string, runId: string): string {
  return runPrefix(tenant, runId) + runRegistrySuffix;
}

/** recordKey is the storage key of one handle's record in a run's registry. */
export function recordKey(tenant: string, runId: string, handle: string): string {
  return `${registryPrefix(tenant, runId)}${recordSegment(handle)}`;
}

/** runMetaKey stores a run's metadata (expiry, fork origin). */
export function runMetaKey(tenant: string, runId: string): string {
  return runPrefix(tenant, runId) + runMetaSuffix;
}

/** runTtlKey stores a run's expiry as `{expiresMs, tenant, runId}`. */
export function runTtlKey(tenant: string, runId: string): string {
  return runPrefix(tenant, runId) + runTtlSuffix;
}

/**
 * runDeletedKey marks a run deleted while forks still refer to its bytes: its id stays held
 * (offloads into it are refused) until the last such fork is deleted and the bytes go.
 */
export function runDeletedKey(tenant: string, runId: string): string {
  return `${runPrefix(tenant, runId)}deleted`;
}

/** forkMarkerPrefix lists the runs still referring to this run's blobs. */
export function forkMarkerPrefix(tenant: string, runId: string): string {
  return `${runPrefix(tenant, runId)}f/`;
}

/** forkMarkerKey records that child refers to blobs owned by run. */
export function forkMarkerKey(tenant: string, runId: string, childRunId: string): string {
  return `${forkMarkerPrefix(tenant, runId)}${segment(childRunId)}`;
}

/** ownerRefPrefix lists the runs whose blobs this run's forked records refer to. */
export function ownerRefPrefix(tenant: string, runId: string): string {
  return `${runPrefix(tenant, runId)}o/`;
}

/** ownerRefKey records that run's forked records refer to blobs owned by ownerRunId. */
export function ownerRefKey(tenant: string, runId: string, ownerRunId: string): string {
  return `${ownerRefPrefix(tenant, runId)}${segment(ownerRunId)}`;
}

/** mergePrefix holds a run's merge intents and outcomes (merge-run.ts). */
export function mergePrefix(tenant: string, runId: string): string {
  return `${runPrefix(tenant, runId)}m/`;
}

/** mergeIntentPrefix lists the merges into a run that have not finished. */
export function mergeIntentPrefix(tenant: string, runId: string): string {
  return `${mergePrefix(tenant, runId)}i/`;
}

/** mergeIntentKey stores what one merge into a run will write (its journal). */
export function mergeIntentKey(tenant: string, runId: string, mergeId: string): string {
  return `${mergeIntentPrefix(tenant, runId)}${segment(mergeId)}`;
}

/**
 * mergeOutcomeKey stores one merge's decision, `committed` or `aborted`, written create-only:
 * the first writer decides, and a merged record is visible once its merge is committed.
 */
export function mergeOutcomeKey(tenant: string, runId: string, mergeId: string): string {
  return `${mergePrefix(tenant, runId)}o/${segment(mergeId)}`;
}

/** blobPrefix is where a run's payload blobs and line indexes live. */
export function blobPrefix(tenant: string, runId: string): string {
  return `${runPrefix(tenant, runId)}b/`;
}

/**
 * blobKey is the storage key of one upload of a call's output.
 *
 * The slot is folded into the call segment (`<call>.<slot>`, both encoded), a retry's attempt
 * after it (`<call>[.<slot>]!<nnnn>`, attempt 2 and up; the first attempt's segment is what it
 * always was), and the whole is digested when long. Encoded values hold neither `.` nor `!`,
 * so the undigested segment splits back into call, slot and attempt in one way only, and a
 * digest (`~` and hex) never equals an undigested segment. Each upload gets its own object
 * named by uploadId, so concurrent uploads never write the same object; the registry record,
 * written create-only, is the commit point.
 */
export function blobKey(
  tenant: string,
  runId: string,
  callId: string,
  slot: string | undefined,
  uploadId: string,
  attempt?: number,
): string {
  const call =
    slot === undefined ? encodeSegment(callId) : `${encodeSegment(callId)}.${encodeSegment(slot)}`;
  return `${blobPrefix(tenant, runId)}${storedSegment(call + attemptSuffix(attempt))}/${uploadId}`;
}

/** lineIndexKey stores the line index beside its blob. */
export function lineIndexKey(blob: string): string {
  return `${blob}.idx`;
}

/** jsonIndexKey stores the JSON view index beside its blob. */
export function jsonIndexKey(blob: string): string {
  return `${blob}.jidx`;
}

/** truncateForMessage bounds user input echoed back in error messages. */
export function truncateForMessage(value: string, max = 64): string {
  return value.length <= max ? value : `${value.slice(0, max)}…`;
}
