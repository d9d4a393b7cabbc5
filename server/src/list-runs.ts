import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { type RunInfo, RunInfoSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { Backend } from "./backends/backend.js";
import { readObject } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import {
  decodeSegment,
  encodeSegment,
  isStoredRunSegment,
  runPrefix,
  tenantRunsPrefix,
} from "./keys.js";
import { decodeRunsPageToken, encodeRunsPageToken } from "./page-token.js";
import { isExpired, type StoredRecord } from "./record.js";
import type { Registry } from "./registry.js";
import { type RunMeta, runTtlSuffix } from "./runs.js";

/** Runs a page holds when the request leaves page_size at 0. */
export const DEFAULT_RUNS_PAGE_SIZE = 100;
/**
 * Records one call reads at most before it ends its page early (it always finishes the run it
 * is summarising, and lists at least one run): what bounds a call over runs of many outputs.
 */
export const LIST_RUNS_RECORD_BUDGET = 10_000;
/**
 * Run prefixes one call passes over without listing them (expired, deleted, emptied) before
 * it ends its page early, so a tenant full of deleted runs still answers in bounded time.
 */
export const LIST_RUNS_SKIP_BUDGET = 1_000;
/** Registry keys listed per backend call while a run's records are counted. */
const recordKeysPerList = 500;
/** Record reads in flight while a run's records are counted. */
const recordReadsInFlight = 16;
/** The largest run metadata or TTL object read. */
const maxMetaBytes = 65_536;

/** The warn call ListRuns makes for what it skips (pino's signature). */
export interface ListRunsLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** What listRuns needs of the service's state. */
export interface ListRunsDeps {
  readonly backend: Backend;
  readonly registry: Registry;
  readonly now: () => number;
}

/** One page of runs, as ListRunsResponse carries it. */
export interface RunsPage {
  readonly runs: RunInfo[];
  readonly nextPageToken: string;
}

/**
 * listRuns answers ListRuns: one page of the tenant's live runs in the order of their stored
 * segments (what the token resumes after), each with its live outputs' count and bytes, times,
 * expiry and fork parent.
 *
 * Only keys under the tenant's own prefix are read, so another tenant's runs never appear. A
 * run is listed when it is not expired and holds a live output or was made by a fork; a
 * deleted run holds neither. Its id comes from stored data (the fork's metadata, its TTL
 * object, or a record offloaded to it), never from a digest in a key. Work per call: one key
 * listing per run prefix passed, three small reads per run, and one read per record of each
 * listed run; a page ends early after LIST_RUNS_RECORD_BUDGET records or LIST_RUNS_SKIP_BUDGET
 * prefixes passed over, with a token to go on. An entry that cannot be read (a planted
 * symlink, a corrupt record or metadata object) is logged and skipped: a bad record is left
 * out of its run's count and bytes, a bad metadata object leaves its run out of the listing.
 */
export async function listRuns(
  deps: ListRunsDeps,
  tenant: string,
  req: { readonly pageSize: number; readonly pageToken: string },
  signal: AbortSignal | undefined,
  log: ListRunsLog | undefined,
): Promise<RunsPage> {
  const after = decodeRunsPageToken(tenant, req.pageToken);
  if (after !== undefined && !isStoredRunSegment(after)) {
    throw new ConnectError(
      "page_token: not a token this server issued for this tenant's runs; start again without one",
      Code.InvalidArgument,
    );
  }
  const pageSize = req.pageSize === 0 ? DEFAULT_RUNS_PAGE_SIZE : req.pageSize;
  const nowMs = deps.now();
  const base = tenantRunsPrefix(tenant);
  const refused = (key: string, reason: unknown) =>
    log?.warn({ key, err: reason }, "ListRuns skipped an entry it cannot read");

  /** The stored segment of the first run after `cursor`, or undefined when none follows. */
  const nextSegment = async (cursor: string | undefined): Promise<string | undefined> => {
    // Every key of run `s` sorts before `<base>s0` ("/" < "0"), and no segment lies between
    // `s/` and `s0`, so listing after `<base>s0` skips the whole run in one call.
    let startAfter = cursor === undefined ? undefined : `${base}${cursor}0`;
    for (;;) {
      const page = await deps.backend.list(base, {
        limit: 1,
        ...(startAfter === undefined ? {} : { startAfter }),
        onRefused: refused,
        ...signalOption(signal),
      });
      const key = page.keys[0];
      if (key === undefined) return undefined;
      const rest = key.slice(base.length);
      const cut = rest.indexOf("/");
      const segment = cut < 0 ? rest : rest.slice(0, cut);
      if (cut >= 0 && isStoredRunSegment(segment)) return segment;
      // A key no run could have made: step over it alone.
      refused(key, "not a run's key");
      startAfter = cut < 0 ? key : `${base}${segment}0`;
    }
  };

  const runs: RunInfo[] = [];
  let recordsRead = 0;
  let skipped = 0;
  let cursor = after;
  for (;;) {
    if (runs.length >= pageSize) break;
    if (runs.length > 0 && recordsRead >= LIST_RUNS_RECORD_BUDGET) break;
    if (skipped >= LIST_RUNS_SKIP_BUDGET) break;
    const segment = await nextSegment(cursor);
    if (segment === undefined) return { runs, nextPageToken: "" };
    cursor = segment;
    const summary = await summarise(deps, tenant, `${base}${segment}/`, nowMs, signal, refused);
    recordsRead += summary.recordsRead;
    if (summary.info === undefined) skipped++;
    else runs.push(summary.info);
  }
  // A token only when another run prefix follows, so the last page says it is the last.
  const more = cursor !== undefined && (await nextSegment(cursor)) !== undefined;
  return {
    runs,
    nextPageToken: more && cursor !== undefined ? encodeRunsPageToken(tenant, cursor) : "",
  };
}

/** Reads a small JSON object; undefined when it is absent. */
async function readJson(
  backend: Backend,
  key: string,
  signal: AbortSignal | undefined,
): Promise<Record<string, unknown> | undefined> {
  const bytes = await readObject(backend, key, maxMetaBytes, signal);
  if (bytes === undefined) return undefined;
  const value: unknown = JSON.parse(Buffer.from(bytes).toString("utf8"));
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ConnectError("stored run metadata is not an object", Code.DataLoss);
  }
  return value as Record<string, unknown>;
}

/**
 * Summarises the run stored under `prefix`: undefined info when it is not listed (expired,
 * deleted, without live outputs and no fork, or with metadata that cannot be read).
 */
async function summarise(
  deps: ListRunsDeps,
  tenant: string,
  prefix: string,
  nowMs: number,
  signal: AbortSignal | undefined,
  refused: (key: string, reason: unknown) => void,
): Promise<{ info: RunInfo | undefined; recordsRead: number }> {
  const owns = (runId: unknown): runId is string =>
    typeof runId === "string" && runPrefix(tenant, runId) === prefix;
  let ttl: Record<string, unknown> | undefined;
  let meta: (RunMeta & Record<string, unknown>) | undefined;
  try {
    [ttl, meta] = await Promise.all([
      readJson(deps.backend, prefix + runTtlSuffix, signal),
      readJson(deps.backend, `${prefix}meta`, signal) as Promise<
        (RunMeta & Record<string, unknown>) | undefined
      >,
    ]);
  } catch (err) {
    if (signal?.aborted === true) throw err;
    refused(prefix, err);
    return { info: undefined, recordsRead: 0 };
  }
  const expiresMs = typeof ttl?.expiresMs === "number" ? ttl.expiresMs : undefined;
  if (expiresMs !== undefined && expiresMs <= nowMs) return { info: undefined, recordsRead: 0 };

  let runId = owns(meta?.runId) ? meta.runId : owns(ttl?.runId) ? ttl.runId : undefined;
  let outputs = 0;
  let bytes = 0;
  let firstMs: number | undefined;
  let lastOwnMs: number | undefined;
  let recordsRead = 0;
  const visit = (record: StoredRecord) => {
    if (record.tenant !== tenant) return;
    firstMs = Math.min(firstMs ?? record.createdMs, record.createdMs);
    if (owns(record.runId)) {
      runId ??= record.runId;
      lastOwnMs = Math.max(lastOwnMs ?? record.createdMs, record.createdMs);
    }
    if (isExpired(record, nowMs)) return;
    outputs++;
    bytes += record.sizeBytes;
  };

  const registryPrefix = `${prefix}h/`;
  let startAfter: string | undefined;
  for (;;) {
    const page = await deps.backend.list(registryPrefix, {
      limit: recordKeysPerList,
      ...(startAfter === undefined ? {} : { startAfter }),
      onRefused: refused,
      ...signalOption(signal),
    });
    for (let i = 0; i < page.keys.length; i += recordReadsInFlight) {
      const batch = page.keys.slice(i, i + recordReadsInFlight);
      const read = await Promise.all(
        batch.map(async (key) => {
          try {
            return await deps.registry.readAt(key, signal);
          } catch (err) {
            if (signal?.aborted === true) throw err;
            refused(key, err);
            return undefined;
          }
        }),
      );
      recordsRead += batch.length;
      for (const record of read) if (record !== undefined) visit(record);
    }
    startAfter = page.keys.at(-1);
    if (!page.truncated || startAfter === undefined) break;
  }

  if (outputs === 0 && meta === undefined) return { info: undefined, recordsRead };
  if (runId === undefined && meta !== undefined) {
    // A fork stored before fork metadata named its run, with no TTL and no output of its own:
    // a segment that is no digest decodes to the id exactly (encodeSegment is injective).
    const segment = prefix.slice(tenantRunsPrefix(tenant).length, -1);
    if (!segment.startsWith("~")) {
      try {
        const decoded = decodeSegment(segment);
        if (encodeSegment(decoded) === segment) runId = decoded;
      } catch {
        // Not UTF-8 once decoded: no run id encodes to it.
      }
    }
  }
  if (runId === undefined) {
    refused(prefix, "no stored data names this run");
    return { info: undefined, recordsRead };
  }
  const forkedMs = typeof meta?.createdMs === "number" ? meta.createdMs : undefined;
  const createMs = forkedMs ?? firstMs ?? nowMs;
  const updateMs = Math.max(createMs, lastOwnMs ?? createMs);
  return {
    info: create(RunInfoSchema, {
      runId,
      outputCount: BigInt(outputs),
      sizeBytes: BigInt(bytes),
      createTime: timestampFromMs(createMs),
      updateTime: timestampFromMs(updateMs),
      ...(expiresMs === undefined ? {} : { expireTime: timestampFromMs(expiresMs) }),
      parentRunId: typeof meta?.parentRunId === "string" ? meta.parentRunId : "",
    }),
    recordsRead,
  };
}
