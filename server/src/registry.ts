import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend } from "./backends/backend.js";
import { bytesBody, readObject } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import {
  blobPrefix,
  jsonIndexKey,
  lineIndexKey,
  recordKey,
  recordNameOfKey,
  recordSegment,
  registryPrefix,
  tenantPrefix,
  truncateForMessage,
} from "./keys.js";
import { createMergeOutcomes, type MergeOutcomes } from "./merge-outcomes.js";
import { encodeRecord, isSameCommit, type NewRecord, type StoredRecord } from "./record.js";
import { createGroupCommit, type RecordWriter } from "./record-group-commit.js";
import { createRecordMemo } from "./record-memo.js";
import { findInPack, isRecordPack, packHeadBytes } from "./record-pack.js";

/** The largest record the registry reads back (inline payloads included). */
const MAX_RECORD_BYTES = 4 * 1024 * 1024;
/** Record reads a list page runs at once. */
const listReadsInFlight = 16;

const newline = 0x0a;
/**
 * What a record read reads first: a typical single record whole (a 4 KiB inline payload makes
 * ~6 KB), or a pack's header (~8 KB for 64 records with short keys). A longer header is read
 * again up to packHeadBytes, its bound; reading that much every time cost replays ~15% more
 * server CPU (bench `replay_offloads`).
 */
const firstReadBytes = 16 * 1024;

/**
 * checkStored returns the record read under `key` if it is one that key can hold: its tenant's
 * and handle's (a pack's header may point anywhere in the pack), and with its bytes inside its
 * tenant's storage, in the blob area of the run it names as their owner (the record decides
 * what a read serves, so a record planted or altered in one run's registry must not serve
 * another tenant's or another run's objects). Anything else is DATA_LOSS.
 */
function checkStored(key: string, record: StoredRecord): StoredRecord {
  const handleSegment = recordSegment(record.handle);
  if (
    typeof record.tenant !== "string" ||
    !key.startsWith(tenantPrefix(record.tenant)) ||
    !key.endsWith(`/h/${handleSegment}`)
  ) {
    throw new ConnectError("stored record belongs to another key", Code.DataLoss);
  }
  const blob = record.blob;
  if (blob === undefined) return record;
  const inside =
    typeof blob.key === "string" &&
    typeof blob.ownerRunId === "string" &&
    blob.key.startsWith(blobPrefix(record.tenant, blob.ownerRunId)) &&
    isBlobName(blob.key.slice(blobPrefix(record.tenant, blob.ownerRunId).length)) &&
    (blob.indexKey === undefined || blob.indexKey === lineIndexKey(blob.key)) &&
    (blob.jsonIndexKey === undefined || blob.jsonIndexKey === jsonIndexKey(blob.key));
  if (!inside) {
    throw new ConnectError("stored record points outside its run's blobs", Code.DataLoss);
  }
  return record;
}

/** A blob's name below its run's blob prefix: `<call segment>/<upload id>`. */
function isBlobName(rest: string): boolean {
  const parts = rest.split("/");
  return parts.length === 2 && parts.every((p) => p !== "" && p !== "." && p !== "..");
}

function changingRecord(): ConnectError {
  return new ConnectError("stored record changed while it was read; retry", Code.Aborted);
}

/** RegistryPage is one page of a run's records. */
export interface RegistryPage {
  readonly records: StoredRecord[];
  /** The opaque cursor to continue after, or undefined on the last page. */
  readonly nextAfter: string | undefined;
}

/** ListBudget bounds a list page by what its records cost the caller (their encoded size). */
export interface ListBudget {
  readonly bytes: number;
  sizeOf(record: StoredRecord): number;
}

/** PendingOption asks for records whose merge has not committed (merge-run.ts only). */
export interface PendingOption {
  readonly pending?: boolean;
}

/**
 * Registry keeps each run's handle records in the backend, one immutable object per handle.
 *
 * It is the only way a handle turns into bytes: a handle resolves to the record stored under
 * the reading run's own prefix, or to nothing. Records are written create-only, which makes
 * the write the commit point of an offload.
 */
export interface Registry {
  /**
   * Returns the record of handle in the run, or undefined (expiry is not checked here). A
   * record a merge wrote is returned once that merge committed; `pending` returns it before.
   */
  get(
    tenant: string,
    runId: string,
    handle: string,
    signal?: AbortSignal,
    opts?: PendingOption,
  ): Promise<StoredRecord | undefined>;
  /**
   * Writes a record create-only. Resolves with the record now committed under the handle:
   * `record` itself, or the one an earlier writer committed first (`created` false). A handle
   * held by a merge not yet committed is ABORTED (retry), unless `pending` asks for that record.
   */
  commit(
    record: NewRecord,
    runId: string,
    signal?: AbortSignal,
    opts?: PendingOption,
  ): Promise<{ record: StoredRecord; created: boolean }>;
  /**
   * Lists a run's visible records in storage-key order (a merge's records once it committed).
   * `after` is the opaque cursor a previous page returned as nextAfter. With a `budget`, the
   * page also ends before the record that would take the sum of `sizeOf` past `bytes` (nextAfter
   * then continues at that record), unless nothing has counted yet: a page always holds the
   * first record that costs something, however large. With `onUnreadable`, a record that
   * cannot be read as a record (DATA_LOSS: corrupt; PERMISSION_DENIED: unreadable) is reported
   * there and left off the page instead of failing it.
   */
  list(
    tenant: string,
    runId: string,
    opts: {
      after?: string | undefined;
      limit: number;
      signal?: AbortSignal;
      budget?: ListBudget;
      onUnreadable?: (key: string, reason: ConnectError) => void;
    },
  ): Promise<RegistryPage>;
  /**
   * Reads the record stored under a registry key (a key `list` of the backend returned under
   * a registry prefix), single or packed; undefined when it is gone. Tenant and handle are not
   * checked: callers that walk the store (the sweeper) use what the record says. A merge's
   * record is undefined until that merge committed.
   */
  readAt(key: string, signal?: AbortSignal): Promise<StoredRecord | undefined>;
  /** Removes one record; a missing record is not an error. */
  remove(tenant: string, runId: string, handle: string, signal?: AbortSignal): Promise<void>;
  /**
   * Removes the record of `commit`'s handle in the run only while it is still that commit
   * (isSameCommit), read again first: one committed in its place since (another offload's,
   * acknowledged, after a DeleteRun took this one) stays. Resolves whether it removed it. A
   * read-then-delete: the backend has no conditional delete, so a commit landing between the
   * two can still go.
   */
  removeCommit(
    commit: Pick<StoredRecord, "tenant" | "handle" | "createdMs" | "expiresMs" | "sha256" | "blob">,
    runId: string,
    signal?: AbortSignal,
  ): Promise<boolean>;
  /** The outcomes of merges, which decide whether a merged record is visible. */
  readonly merges: MergeOutcomes;
}

/**
 * createRegistry stores run registries in backend. On a backend with putMany, records
 * committed in the same turn of the event loop are written together (createGroupCommit) and
 * each is read back from the pack stored under its key.
 */
export function createRegistry(backend: Backend): Registry {
  const { putMany } = backend;
  const writer: RecordWriter =
    putMany === undefined
      ? {
          async write(key, bytes, signal) {
            await backend.put(key, bytesBody(bytes), signalOption(signal));
          },
        }
      : createGroupCommit({ ...backend, putMany });

  const readRecord = async (key: string, signal?: AbortSignal) => {
    try {
      const record = await readStored(key, signal);
      return record === undefined ? undefined : checkStored(key, record);
    } catch (err) {
      // A run's listing, fork or merge meets many records: the message says which one.
      if (err instanceof ConnectError && err.code === Code.DataLoss) {
        throw new ConnectError(
          `${err.rawMessage} (output ${recordNameOfKey(key)})`,
          Code.DataLoss,
          undefined,
          undefined,
          err,
        );
      }
      throw err;
    }
  };

  const merges = createMergeOutcomes(backend);
  const memo = createRecordMemo();
  const visible = async (record: StoredRecord | undefined, signal?: AbortSignal) =>
    record === undefined || (await merges.isVisible(record, signal)) ? record : undefined;

  const readStored = async (key: string, signal?: AbortSignal) => {
    // The first read covers a single record (most are far smaller) or a pack's header and the
    // records after it. A record further into a pack is read by itself, and then the header
    // once more: the pack's name may have been deleted and taken by another pack between the
    // reads, and a header that reads the same both times (every key, offset and length) vouches
    // that the record came from the pack it describes. Otherwise the whole lookup starts over.
    for (let attempt = 1; ; attempt++) {
      let asked = firstReadBytes;
      let bytes = await readObject(backend, key, MAX_RECORD_BYTES, signal, { length: asked });
      if (bytes === undefined) return undefined;
      if (!isRecordPack(bytes)) {
        if (bytes.byteLength < firstReadBytes) return memo.decode(key, bytes);
        const whole = await readObject(backend, key, MAX_RECORD_BYTES, signal);
        if (whole === undefined) return undefined;
        if (!isRecordPack(whole)) return memo.decode(key, whole);
        if (attempt >= 3) throw changingRecord();
        continue;
      }
      if (bytes.byteLength === firstReadBytes && bytes.indexOf(newline) < 0) {
        // A header longer than the first read: read as much as a header may take.
        asked = packHeadBytes;
        bytes = await readObject(backend, key, MAX_RECORD_BYTES, signal, { length: asked });
        if (bytes === undefined) return undefined;
        if (!isRecordPack(bytes)) {
          if (attempt >= 3) throw changingRecord();
          continue;
        }
      }
      const slice = findInPack(bytes, key);
      if (slice === undefined) {
        throw new ConnectError("stored record pack holds no record for its key", Code.DataLoss);
      }
      const end = slice.offset + slice.length;
      if (end <= bytes.byteLength) return memo.decode(key, bytes.subarray(slice.offset, end));
      if (bytes.byteLength < asked) {
        throw new ConnectError("stored record pack is shorter than its header says", Code.DataLoss);
      }
      const headerBytes = bytes.indexOf(newline) + 1;
      // One after the other: the header read must come after the record's.
      const record = await readObject(backend, key, MAX_RECORD_BYTES, signal, slice);
      if (record === undefined) return undefined;
      const header = await readObject(backend, key, headerBytes, signal, { length: headerBytes });
      if (header === undefined) return undefined;
      if (Buffer.compare(header, bytes.subarray(0, headerBytes)) === 0) {
        if (record.byteLength < slice.length) {
          throw new ConnectError(
            "stored record pack is shorter than its header says",
            Code.DataLoss,
          );
        }
        return memo.decode(key, record);
      }
      if (attempt >= 3) throw changingRecord();
    }
  };

  const get: Registry["get"] = async (tenant, runId, handle, signal, opts) => {
    const record = await readRecord(recordKey(tenant, runId, handle), signal);
    if (record === undefined) return undefined;
    // The key names them, so readRecord checked both; this only guards that reasoning.
    if (record.handle !== handle || record.tenant !== tenant) {
      throw new ConnectError("stored record belongs to another key", Code.DataLoss);
    }
    return opts?.pending === true ? record : visible(record, signal);
  };

  return {
    merges,
    get,
    readAt: async (key, signal) => visible(await readRecord(key, signal), signal),
    async commit(record, runId, signal, opts) {
      const key = recordKey(record.tenant, runId, record.handle);
      try {
        await writer.write(key, encodeRecord(record), signal);
        return { record, created: true };
      } catch (err) {
        if (!(err instanceof ConnectError && err.code === Code.AlreadyExists)) throw err;
      }
      const existing = await get(record.tenant, runId, record.handle, signal, { pending: true });
      if (existing !== undefined && opts?.pending !== true && !(await visible(existing, signal))) {
        throw new ConnectError(
          `a merge into run "${truncateForMessage(runId)}" is writing handle "${truncateForMessage(record.handle)}"; retry`,
          Code.Aborted,
        );
      }
      if (existing === undefined) {
        throw new ConnectError("record vanished during a concurrent commit; retry", Code.Aborted);
      }
      return { record: existing, created: false };
    },
    async list(tenant, runId, opts) {
      const prefix = registryPrefix(tenant, runId);
      const page = await backend.list(prefix, {
        limit: opts.limit,
        ...(opts.after === undefined ? {} : { startAfter: prefix + opts.after }),
        ...signalOption(opts.signal),
      });
      // Records are independent reads: a few at a time, not one round trip after another
      // (a page is up to 1,000 records, and run limits, forks and deletes read whole runs).
      // A budget stops the reads too: records of ~320 KB made pages of hundreds of MB.
      const records: StoredRecord[] = [];
      let used = 0;
      const { onUnreadable } = opts;
      for (let i = 0; i < page.keys.length; i += listReadsInFlight) {
        const batch = page.keys.slice(i, i + listReadsInFlight);
        const shown = await Promise.all(
          batch.map(async (key) => {
            try {
              return await visible(await readRecord(key, opts.signal), opts.signal);
            } catch (err) {
              if (onUnreadable === undefined || !isUnreadableRecord(err)) throw err;
              onUnreadable(key, err);
              return undefined;
            }
          }),
        );
        for (const [j, record] of shown.entries()) {
          if (record === undefined || record.tenant !== tenant) continue;
          const size = opts.budget?.sizeOf(record) ?? 0;
          // used > 0: an earlier record counted, so the key before this one is on the page.
          const before = page.keys[i + j - 1];
          const over = opts.budget !== undefined && size > 0 && used + size > opts.budget.bytes;
          if (over && used > 0 && before !== undefined) {
            return { records, nextAfter: before.slice(prefix.length) };
          }
          used += size;
          records.push(record);
        }
      }
      const last = page.keys.at(-1);
      return {
        records,
        nextAfter: page.truncated && last !== undefined ? last.slice(prefix.length) : undefined,
      };
    },
    async remove(tenant, runId, handle, signal) {
      await backend.delete(recordKey(tenant, runId, handle), signalOption(signal));
    },
    async removeCommit(commit, runId, signal) {
      const current = await get(commit.tenant, runId, commit.handle, signal, { pending: true });
      if (current === undefined || !isSameCommit(current, commit)) return false;
      await backend.delete(recordKey(commit.tenant, runId, commit.handle), signalOption(signal));
      return true;
    },
  };
}

/** Whether err says one stored record cannot be read, as opposed to the store failing. */
function isUnreadableRecord(err: unknown): err is ConnectError {
  return (
    err instanceof ConnectError &&
    (err.code === Code.DataLoss || err.code === Code.PermissionDenied)
  );
}
