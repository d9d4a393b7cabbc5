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
  runMetaSuffix,
  runPrefix,
  runRegistrySuffix,
  runTtlSuffix,
  tenantRunsPrefix,
} from "./keys.js";
import { decodeRunsPageToken, encodeRunsPageToken } from "./page-token.js";
import { isExpired, type StoredRecord } from "./record.js";
import type { Registry } from "./registry.js";
import type { RunMeta } from "./runs.js";

/** Runs a page holds when the request leaves page_size at 0. */
const DEFAULT_RUNS_PAGE_SIZE = 100;
/**
 * Records one call reads at most before it ends its page early (it always finishes the run it
 * is summarising, and lists at least one run): what bounds a call over runs of many outputs.
 */
const LIST_RUNS_RECORD_BUDGET = 2_000;
/**
 * Run prefixes one call passes over without listing them (expired, deleted, emptied) before
 * it ends its page early, so a tenant full of deleted runs still answers in bounded time.
 */
const LIST_RUNS_SKIP_BUDGET = 1_000;
/** Keys one listing of the tenant's runs returns at most (a run takes at least one). */
const keysPerRunListing = 1000;
/** Runs summarised at once. */
const runsInFlight = 8;
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
 * object, or a record offloaded to it), never from a digest in a key.
 *
 * Work per call: key listings of up to 1,000 keys that find the runs (at least one run each,
 * many when runs are small), the run's TTL and fork metadata objects where they exist, and one
 * read per record of each run passed; eight runs are summarised at once. A page ends early
 * after LIST_RUNS_RECORD_BUDGET records (beyond which only the runs already under way are
 * finished) or LIST_RUNS_SKIP_BUDGET prefixes passed over, with a token to go on. An entry
 * that cannot be read (a planted symlink, a corrupt record or metadata object) is logged and
 * skipped: a bad record is left out of its run's count and bytes, a bad metadata object leaves
 * its run out of the listing.
 */
export async function listRuns(
  deps: ListRunsDeps,
  tenant: string,
  req: { readonly pageSize: number; readonly pageToken: string },
  signal: AbortSignal | undefined,
  log: ListRunsLog | undefined,
): Promise<RunsPage> {
  const after = decodeRunsPageToken(tenant, req.pageToken);
  const pageSize = req.pageSize === 0 ? DEFAULT_RUNS_PAGE_SIZE : req.pageSize;
  const nowMs = deps.now();
  const base = tenantRunsPrefix(tenant);
  const refused = (key: string, reason: unknown) =>
    log?.warn({ key, err: reason }, "ListRuns skipped an entry it cannot read");

  const segments = createSegmentReader(deps.backend, base, after, signal, refused);
  const runs: RunInfo[] = [];
  let recordsRead = 0;
  let skipped = 0;
  for (;;) {
    if (runs.length >= pageSize) break;
    if (runs.length > 0 && recordsRead >= LIST_RUNS_RECORD_BUDGET) break;
    if (skipped >= LIST_RUNS_SKIP_BUDGET) break;
    // A few runs at a time, never more than the page still has room for, listed in order.
    const batch: ListedRun[] = [];
    const room = Math.min(runsInFlight, pageSize - runs.length);
    while (batch.length < room) {
      const run = await segments.next();
      if (run === undefined) break;
      batch.push(run);
    }
    if (batch.length === 0) return { runs, nextPageToken: "" };
    const summaries = await Promise.all(
      batch.map((run) =>
        summarise(deps, tenant, `${base}${run.segment}/`, run.keys, nowMs, signal, refused),
      ),
    );
    for (const summary of summaries) {
      recordsRead += summary.recordsRead;
      if (summary.info === undefined) skipped++;
      else runs.push(summary.info);
    }
    segments.consumed((batch.at(-1) as ListedRun).segment);
  }
  // A token only when another run prefix follows, so the last page says it is the last.
  const cursor = segments.cursor();
  return {
    runs,
    nextPageToken:
      cursor !== undefined && (await segments.hasMore()) ? encodeRunsPageToken(tenant, cursor) : "",
  };
}

/** ListedRun is a run found by listing the tenant's runs. */
interface ListedRun {
  readonly segment: string;
  /** Every key of the run, when the listing that found it held them all. */
  readonly keys: string[] | undefined;
}

/** SegmentReader yields the stored segments of a tenant's runs in key order. */
interface SegmentReader {
  /**
   * The next run: its segment and, when one listing held every key of the run, those keys;
   * undefined after the last run.
   */
  next(): Promise<ListedRun | undefined>;
  /** Whether a run follows the ones handed out. */
  hasMore(): Promise<boolean>;
  /** Marks the runs up to `segment` as answered: the page token resumes after it. */
  consumed(segment: string): void;
  /** The last segment consumed (the cursor the call started from when none was). */
  cursor(): string | undefined;
}

/**
 * Reads the run segments under `base` after the one `start` names, listing up to
 * `keysPerRunListing` keys at a time: small runs come many to a listing, and a large run costs
 * no more than one, since the next listing starts after `<base><segment>/\x7f`. Every key a
 * run holds continues its prefix with a letter, below DEL, so that skips the whole run both
 * where stores list in byte order and where they list in directory order (SeaweedFS, where
 * `a/` comes before `a-c/`; in byte order `a-c/` came before `a/`). A key a store lists after
 * that (one planted with a byte above DEL) is stepped over, never taken for its run again.
 */
function createSegmentReader(
  backend: Backend,
  base: string,
  start: string | undefined,
  signal: AbortSignal | undefined,
  refused: (key: string, reason: unknown) => void,
): SegmentReader {
  const queued: ListedRun[] = [];
  const skipKey = (segment: string) => `${base}${segment}/\u007f`;
  let startAfter = start === undefined ? undefined : skipKey(start);
  /** The run the last listing started after: keys of it that still come are strays. */
  let skipped = start;
  let ended = false;
  let cursor = start;
  const segmentOf = (key: string) => {
    const rest = key.slice(base.length);
    const cut = rest.indexOf("/");
    return cut < 0 ? undefined : rest.slice(0, cut);
  };
  const fill = async () => {
    while (queued.length === 0 && !ended) {
      const page = await backend.list(base, {
        limit: keysPerRunListing,
        ...(startAfter === undefined ? {} : { startAfter }),
        onRefused: refused,
        ...signalOption(signal),
      });
      let current: { segment: string; keys: string[]; valid: boolean } | undefined;
      const close = (complete: boolean) => {
        if (current?.valid !== true) return;
        queued.push({ segment: current.segment, keys: complete ? current.keys : undefined });
      };
      for (const key of page.keys) {
        const segment = segmentOf(key);
        if (segment === undefined) {
          refused(key, "not a run's key");
          continue;
        }
        if (current?.segment === segment) {
          current.keys.push(key);
          continue;
        }
        close(true);
        const valid = isStoredRunSegment(segment) && segment !== skipped;
        if (!valid) refused(key, "not a run's key");
        current = { segment, keys: valid ? [key] : [], valid };
      }
      // The last run of a truncated listing may have more keys than the listing held.
      close(!page.truncated);
      const last = page.keys.at(-1);
      if (!page.truncated || last === undefined) ended = true;
      else {
        const segment = segmentOf(last);
        if (segment === undefined || segment === skipped) startAfter = last;
        else {
          startAfter = skipKey(segment);
          skipped = segment;
        }
      }
    }
  };
  return {
    async next() {
      await fill();
      return queued.shift();
    },
    async hasMore() {
      await fill();
      return queued.length > 0;
    },
    consumed(segment) {
      cursor = segment;
    },
    cursor: () => cursor,
  };
}

/** A run's registry keys, a listed page at a time (or the keys the tenant's listing held). */
async function* registryKeys(
  backend: Backend,
  registryPrefix: string,
  listed: readonly string[] | undefined,
  signal: AbortSignal | undefined,
  refused: (key: string, reason: unknown) => void,
): AsyncGenerator<readonly string[]> {
  if (listed !== undefined) {
    yield listed.filter((key) => key.startsWith(registryPrefix));
    return;
  }
  let startAfter: string | undefined;
  for (;;) {
    const page = await backend.list(registryPrefix, {
      limit: recordKeysPerList,
      ...(startAfter === undefined ? {} : { startAfter }),
      onRefused: refused,
      ...signalOption(signal),
    });
    yield page.keys;
    startAfter = page.keys.at(-1);
    if (!page.truncated || startAfter === undefined) return;
  }
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
 * deleted, without live outputs and no fork, or with metadata that cannot be read). `listed`
 * holds every key of the run when the tenant's listing held them all: then only the objects it
 * names are read, and the registry is not listed again.
 */
async function summarise(
  deps: ListRunsDeps,
  tenant: string,
  prefix: string,
  listed: readonly string[] | undefined,
  nowMs: number,
  signal: AbortSignal | undefined,
  refused: (key: string, reason: unknown) => void,
): Promise<{ info: RunInfo | undefined; recordsRead: number }> {
  const owns = (runId: unknown): runId is string =>
    typeof runId === "string" && runPrefix(tenant, runId) === prefix;
  const readIfStored = async (key: string) =>
    listed === undefined || listed.includes(key) ? readJson(deps.backend, key, signal) : undefined;
  let ttl: Record<string, unknown> | undefined;
  let meta: (RunMeta & Record<string, unknown>) | undefined;
  try {
    [ttl, meta] = await Promise.all([
      readIfStored(prefix + runTtlSuffix),
      readIfStored(prefix + runMetaSuffix) as Promise<
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
    // A record MergeRun brought in names the run it was offloaded to; it is this run's from the
    // merge on (a fork's copy drops the mark).
    const merge = record.merge;
    if (merge !== undefined && owns(merge.into)) {
      runId ??= merge.into;
      const mergedMs = typeof merge.ms === "number" ? merge.ms : record.createdMs;
      lastOwnMs = Math.max(lastOwnMs ?? mergedMs, mergedMs);
    }
    if (isExpired(record, nowMs)) return;
    outputs++;
    bytes += record.sizeBytes;
  };

  for await (const keys of registryKeys(
    deps.backend,
    prefix + runRegistrySuffix,
    listed,
    signal,
    refused,
  )) {
    for (let i = 0; i < keys.length; i += recordReadsInFlight) {
      const batch = keys.slice(i, i + recordReadsInFlight);
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
