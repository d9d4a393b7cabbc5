import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend, ObjectInfo } from "./backends/backend.js";
import { abortReason, bytesBody } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import {
  encodeRecordPack,
  type PackedRecord,
  packEntryBound,
  packHeadBytes,
  packHeaderBound,
} from "./record-pack.js";

/** The most records one pack holds; more records committed at once make several packs. */
const maxPackRecords = 64;

/**
 * Splits a turn's records by the directory of their keys (one run's registry), in order: a
 * pack is stored under every one of its records' keys, so a pack of records from several runs
 * or tenants would put one tenant's records (previews, inline payloads) in another's files,
 * and keep a deleted run's records on disk for as long as another run keeps the pack.
 */
function byDirectory(group: readonly Pending[]): Pending[][] {
  const groups = new Map<string, Pending[]>();
  for (const member of group) {
    const { key } = member.record;
    const directory = key.slice(0, key.lastIndexOf("/") + 1);
    const members = groups.get(directory);
    if (members === undefined) groups.set(directory, [member]);
    else members.push(member);
  }
  return [...groups.values()];
}

/** RecordWriter writes one encoded record create-only, as `Backend.put` would. */
export interface RecordWriter {
  /**
   * write resolves once the record is durable under key, and rejects as `put` does: a taken
   * key with ALREADY_EXISTS, an aborted signal with its reason (nothing written), any other
   * failure with the store's error.
   */
  write(key: string, bytes: Uint8Array, signal?: AbortSignal): Promise<void>;
}

interface Pending {
  readonly record: PackedRecord;
  readonly signal: AbortSignal | undefined;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * createGroupCommit returns a RecordWriter that commits the records written in the same turn
 * of the event loop together, on a backend with putMany: one object holding all of them (a
 * record pack) is stored under every record's key at once (only records whose keys share a
 * directory, one run's registry, share a pack: no run's or tenant's files hold another's), so N records cost one file, one
 * fsync and N links on the filesystem instead of N of each (the 32 offloads of an
 * OffloadBatch commit as one pack). Each record still commits on its own: a taken key is
 * ALREADY_EXISTS for that record only, and a record the pack could not reach (the pack failed
 * as a whole, or its name failed otherwise) is put by itself. A record alone in its turn is put
 * as before.
 */
export function createGroupCommit(
  backend: Backend & { putMany: NonNullable<Backend["putMany"]> },
): RecordWriter {
  let pending: Pending[] = [];

  const putAlone = async (member: Pending) => {
    try {
      await backend.put(
        member.record.key,
        bytesBody(member.record.bytes),
        signalOption(member.signal),
      );
      member.resolve();
    } catch (err) {
      member.reject(err);
    }
  };

  const commitPack = async (members: readonly Pending[]) => {
    const live: Pending[] = [];
    for (const member of members) {
      if (member.signal?.aborted === true) member.reject(abortReason(member.signal));
      else live.push(member);
    }
    const [only] = live;
    if (only === undefined) return;
    if (live.length === 1) return putAlone(only);
    const pack = encodeRecordPack(live.map((member) => member.record));
    let results: readonly (ObjectInfo | ConnectError)[];
    try {
      results = await backend.putMany(
        live.map((member) => member.record.key),
        bytesBody(pack),
      );
    } catch {
      // The pack could not be written at all: each record is put on its own instead, and
      // fails with its own error if the store is down.
      await Promise.all(live.map(putAlone));
      return;
    }
    await Promise.all(
      live.map(async (member, i) => {
        const result = results[i];
        if (!(result instanceof ConnectError)) member.resolve();
        else if (result.code === Code.AlreadyExists) member.reject(result);
        // A name the store could not link (not a taken one): the record goes on its own.
        else await putAlone(member);
      }),
    );
  };

  const commit = (members: readonly Pending[]) => {
    commitPack(members).catch((err: unknown) => {
      // Only encoding can throw here; the members still unsettled fail with it.
      for (const member of members) member.reject(err);
    });
  };

  /**
   * Commits a group in packs of at most maxPackRecords whose header fits what readers read
   * first. A key may appear once in a pack (a reader finds the first entry for its key, which
   * must be the one that won the name): a second record for a key goes to a later pack of its
   * own, and the two race for the name like any two puts.
   */
  const flush = (group: readonly Pending[]) => {
    const later: Pending[] = [];
    let pack: Pending[] = [];
    let keys = new Set<string>();
    let entryBytes = 0;
    for (const member of group) {
      if (keys.has(member.record.key)) {
        later.push(member);
        continue;
      }
      const entry = packEntryBound(member.record.key);
      const full =
        pack.length >= maxPackRecords || packHeaderBound(entryBytes + entry) > packHeadBytes;
      if (pack.length > 0 && full) {
        commit(pack);
        pack = [];
        keys = new Set();
        entryBytes = 0;
      }
      pack.push(member);
      keys.add(member.record.key);
      entryBytes += entry;
    }
    commit(pack);
    if (later.length > 0) flush(later);
  };

  return {
    write(key, bytes, signal) {
      return new Promise<void>((resolve, reject) => {
        if (pending.length === 0) {
          setImmediate(() => {
            const group = pending;
            pending = [];
            for (const members of byDirectory(group)) flush(members);
          });
        }
        pending.push({ record: { key, bytes }, signal, resolve, reject });
      });
    },
  };
}
