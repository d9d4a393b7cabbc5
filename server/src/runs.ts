import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend } from "./backends/backend.js";
import { bytesBody, readObject } from "./backends/body.js";
import {
  blobPrefix,
  forkMarkerKey,
  forkMarkerPrefix,
  mergePrefix,
  ownerRefKey,
  ownerRefPrefix,
  registryPrefix,
  runDeletedKey,
  runMetaKey,
  runTtlKey,
  truncateForMessage,
} from "./keys.js";
import { isExpired, recommit, type StoredRecord } from "./record.js";
import type { Registry } from "./registry.js";

/** Runs manages run-level state kept in the backend: expiry, forks and deletion. */
export interface Runs {
  /** When the run expires, or undefined when it does not. */
  expiresMs(tenant: string, runId: string, signal?: AbortSignal): Promise<number | undefined>;
  /** True when the run was deleted while forks still referred to its bytes. */
  isDeleted(tenant: string, runId: string, signal?: AbortSignal): Promise<boolean>;
  /** What ForkRun stored about the run, or undefined for a run no fork created. */
  meta(tenant: string, runId: string, signal?: AbortSignal): Promise<RunMeta | undefined>;
  /**
   * Records that runId's records may refer to bytes ownerRunId owns (ForkRun's copies,
   * MergeRun's records): an owner reference under runId and a fork marker under the owner.
   * Called before the first such record, so deleting either run keeps the bytes the other's
   * records use, and the last of them deleted removes them. Idempotent.
   */
  refer(tenant: string, runId: string, ownerRunId: string, signal?: AbortSignal): Promise<void>;
  /**
   * Removes the TTL of a run left with no record and no fork metadata (the sweep removed its
   * last outputs, expired one by one): a TTL that outlived its run would expire the next run
   * given its id.
   */
  dropTtlIfGone(tenant: string, runId: string, signal?: AbortSignal): Promise<void>;
  /**
   * Sets the run to expire ttlMs from now and returns the expiry; NOT_FOUND for a run that does
   * not exist (no record and not forked: never used, deleted or swept) or has expired.
   */
  setTtl(tenant: string, runId: string, ttlMs: number, signal?: AbortSignal): Promise<number>;
  /**
   * Creates child with copies of parent's live records (no byte copies) and returns how many.
   * The child must not exist; later handles of either run stay invisible to the other.
   */
  fork(
    tenant: string,
    parentRunId: string,
    childRunId: string,
    ttlMs: number | undefined,
    signal?: AbortSignal,
  ): Promise<number>;
  /**
   * Removes a run's registry and metadata, and its bytes unless a fork still refers to them
   * (those go when the last such fork is deleted). Returns the records removed.
   */
  delete(tenant: string, runId: string, signal?: AbortSignal): Promise<number>;
}

/** RunMeta is what a fork stores about the run it created (runMetaKey). */
export interface RunMeta {
  readonly createdMs: number;
  /**
   * The fork's own run id, as given: its key holds a digest when the id is long. Forks made
   * before it was stored lack it.
   */
  readonly runId?: string;
  readonly parentRunId?: string;
  /**
   * True when every run whose bytes the fork's records refer to has an owner reference under
   * the fork (ownerRefKey), written before the first such record. Forks made before owner
   * references existed lack it: deleting one reads its records to find their owners.
   */
  readonly ownerRefs?: boolean;
}

/** What a fork has written into its child so far: what it takes back if it does not finish. */
interface ForkWrites {
  /** The records it committed in the child. */
  readonly records: StoredRecord[];
  /** Runs it referred to (owner references and fork markers), possibly written. */
  readonly owners: Set<string>;
  /** Whether it set the child's TTL. */
  ttl: boolean;
}

/** Records a fork commits at once (the most a record pack holds). */
const forkCommitsInFlight = 64;

/** createRuns keeps run state beside the registry in backend. */
export function createRuns(backend: Backend, registry: Registry, now = () => Date.now()): Runs {
  const opt = (signal: AbortSignal | undefined) => (signal === undefined ? {} : { signal });

  const readJson = async (key: string, signal?: AbortSignal): Promise<unknown> => {
    const bytes = await readObject(backend, key, 65536, signal);
    return bytes === undefined ? undefined : JSON.parse(Buffer.from(bytes).toString());
  };

  const putJson = async (key: string, value: unknown, signal?: AbortSignal) => {
    await backend.put(key, bytesBody(Buffer.from(JSON.stringify(value))), opt(signal));
  };

  const putIfAbsent = async (key: string, value: unknown, signal?: AbortSignal) => {
    try {
      await putJson(key, value, signal);
    } catch (err) {
      if (!(err instanceof ConnectError && err.code === Code.AlreadyExists)) throw err;
    }
  };

  /** Deletes every object under prefix, a listed page at a time; returns how many. */
  const deleteAll = async (prefix: string, signal?: AbortSignal) => {
    let deleted = 0;
    for (;;) {
      const page = await backend.list(prefix, { limit: 1000, ...opt(signal) });
      await backend.deleteMany(page.keys, opt(signal));
      deleted += page.keys.length;
      if (!page.truncated || page.keys.length === 0) return deleted;
    }
  };

  const exists = async (key: string, signal?: AbortSignal) =>
    (await backend.head(key, opt(signal))) !== undefined;

  const hasAny = async (prefix: string, signal?: AbortSignal) =>
    (await backend.list(prefix, { limit: 1, ...opt(signal) })).keys.length > 0;

  /** Visits a run's records a listed page at a time. */
  const forEachPage = async (
    tenant: string,
    runId: string,
    signal: AbortSignal | undefined,
    visit: (records: readonly StoredRecord[]) => Promise<void>,
  ) => {
    let after: string | undefined;
    do {
      const page = await registry.list(tenant, runId, {
        after,
        limit: 500,
        ...opt(signal),
      });
      await visit(page.records);
      after = page.nextAfter;
    } while (after !== undefined);
  };

  /** The runs whose bytes a fork's records refer to, from its owner references. */
  const ownerRefs = async (tenant: string, runId: string, signal?: AbortSignal) => {
    const owners = new Set<string>();
    const prefix = ownerRefPrefix(tenant, runId);
    let startAfter: string | undefined;
    for (;;) {
      const page = await backend.list(prefix, {
        limit: 1000,
        ...(startAfter === undefined ? {} : { startAfter }),
        ...opt(signal),
      });
      for (const key of page.keys) {
        const ref = (await readJson(key, signal)) as { ownerRunId?: unknown } | undefined;
        if (typeof ref?.ownerRunId === "string") owners.add(ref.ownerRunId);
      }
      startAfter = page.keys.at(-1);
      if (!page.truncated || startAfter === undefined) return owners;
    }
  };

  /** Deletes an owner run's bytes once it is deleted and no fork refers to them. */
  const collectIfUnreferenced = async (
    tenant: string,
    ownerRunId: string,
    signal?: AbortSignal,
  ) => {
    if (!(await exists(runDeletedKey(tenant, ownerRunId), signal))) return;
    if (await hasAny(forkMarkerPrefix(tenant, ownerRunId), signal)) return;
    await deleteAll(blobPrefix(tenant, ownerRunId), signal);
    await backend.delete(runDeletedKey(tenant, ownerRunId), opt(signal));
  };

  /**
   * A run exists once an offload committed a record in it or a fork created it (its meta), until
   * DeleteRun or the sweeper removes both. Its expiry is checked apart (expiresMs).
   */
  const isLive = async (tenant: string, runId: string, signal?: AbortSignal) => {
    const [records, forked] = await Promise.all([
      hasAny(registryPrefix(tenant, runId), signal),
      exists(runMetaKey(tenant, runId), signal),
    ]);
    return records || forked;
  };

  const refer: Runs["refer"] = async (tenant, runId, ownerRunId, signal) => {
    // The reference tells runId's delete whose marker to take back; the marker keeps the
    // owner's bytes through a concurrent delete of the owner.
    await putIfAbsent(ownerRefKey(tenant, runId, ownerRunId), { ownerRunId }, signal);
    await putIfAbsent(forkMarkerKey(tenant, ownerRunId, runId), { createdMs: now() }, signal);
  };

  const meta: Runs["meta"] = async (tenant, runId, signal) =>
    (await readJson(runMetaKey(tenant, runId), signal)) as RunMeta | undefined;

  const expiresMs: Runs["expiresMs"] = async (tenant, runId, signal) => {
    const value = (await readJson(runTtlKey(tenant, runId), signal)) as
      | { expiresMs?: unknown }
      | undefined;
    return typeof value?.expiresMs === "number" ? value.expiresMs : undefined;
  };

  const deleteRun: Runs["delete"] = async (tenant, runId, signal) => {
    // Only a fork's records can refer to bytes another run owns, and a fork lists those
    // runs (owner references) before its first such record: records are deleted unread.
    const owners = await ownerRefs(tenant, runId, signal);
    const stored = await meta(tenant, runId, signal);
    if (stored?.parentRunId !== undefined && stored.ownerRefs !== true) {
      await forEachPage(tenant, runId, signal, async (records) => {
        for (const record of records) {
          if (record.blob !== undefined && record.blob.ownerRunId !== runId) {
            owners.add(record.blob.ownerRunId);
          }
        }
      });
    }
    const removed = await deleteAll(registryPrefix(tenant, runId), signal);
    // After the records: a merged record is invisible once its merge's outcome is gone.
    await deleteAll(mergePrefix(tenant, runId), signal);
    // The references go after the records, so a delete cut short finds most of them again when
    // repeated, and before the records are listed the last time: a fork copying into this run
    // looks for its references once its copies are committed, so it either sees them gone and
    // takes its copies back, or committed them before the listing below, which takes them.
    // Read again: a fork may have referred to another run since the first read.
    for (const owner of await ownerRefs(tenant, runId, signal)) owners.add(owner);
    for (const owner of owners) {
      await backend.delete(forkMarkerKey(tenant, owner, runId), opt(signal));
      await collectIfUnreferenced(tenant, owner, signal);
    }
    await deleteAll(ownerRefPrefix(tenant, runId), signal);
    let removedLate = 0;
    if (await hasAny(forkMarkerPrefix(tenant, runId), signal)) {
      await putIfAbsent(runDeletedKey(tenant, runId), { deletedMs: now() }, signal);
      // An offload that committed after the first listing and looked for the mark before it
      // was written keeps its record otherwise, in a deleted run, until the last fork takes
      // the bytes with it (read DATA_LOSS for ever); one that commits later sees the mark.
      removedLate = await deleteAll(registryPrefix(tenant, runId), signal);
    } else {
      await deleteAll(blobPrefix(tenant, runId), signal);
      // An offload that committed its record after the first listing, and checked its blob
      // before the blobs went (Offload's checkCommitStands), would otherwise keep a record
      // whose bytes are gone: its record is listed now, after the blobs.
      removedLate = await deleteAll(registryPrefix(tenant, runId), signal);
    }
    // Last, the metadata and then the TTL: while a fork's metadata stands, forking into its id
    // again is refused ALREADY_EXISTS rather than interleaved with this delete (a fork cut by
    // its deadline deletes its child after answering); while an expired run's TTL stands,
    // offloads into it are refused, so none lands in the sweep's deletion of it; and a delete
    // cut short is found again by the next sweep.
    await backend.delete(runMetaKey(tenant, runId), opt(signal));
    await backend.delete(runTtlKey(tenant, runId), opt(signal));
    return removed + removedLate;
  };

  /**
   * Takes back what a fork that did not finish wrote into its child: the records it committed,
   * its references to the runs whose bytes they used (freeing those if they were deleted
   * meanwhile), the TTL it set and, last, its metadata, so that a fork into the id again is
   * refused ALREADY_EXISTS until this is done. Records offloaded into the child meanwhile stay:
   * they were acknowledged, and the child is then the run they made. Not under the call's
   * signal, which may be what ended the fork.
   */
  const abandonFork = async (tenant: string, childRunId: string, wrote: ForkWrites) => {
    // Only the copies themselves (an offload may have committed its own output under a handle
    // since a DeleteRun of the child took the copy), as many at once as it committed.
    for (let i = 0; i < wrote.records.length; i += forkCommitsInFlight) {
      await Promise.all(
        wrote.records
          .slice(i, i + forkCommitsInFlight)
          .map((copy) => registry.removeCommit(copy, childRunId)),
      );
    }
    for (const owner of wrote.owners) {
      await backend.delete(forkMarkerKey(tenant, owner, childRunId));
      await collectIfUnreferenced(tenant, owner);
    }
    await deleteAll(ownerRefPrefix(tenant, childRunId));
    if (wrote.ttl) await backend.delete(runTtlKey(tenant, childRunId));
    await backend.delete(runMetaKey(tenant, childRunId));
  };

  /**
   * Fills the fork `childRunId` (its metadata written) with copies of `parentRunId`'s live
   * records and returns how many; ABORTED when the parent was deleted while they were copied.
   */
  const copyIntoFork = async (
    tenant: string,
    parentRunId: string,
    childRunId: string,
    wrote: ForkWrites,
    signal: AbortSignal | undefined,
  ): Promise<number> => {
    // Referred to before the parent is read: a DeleteRun of the parent that has not looked
    // for forks yet keeps its bytes for this one; one that has looked already deleted its
    // records, so this fork reads none of them, or the check below sees them go.
    const owners = wrote.owners;
    owners.add(parentRunId);
    await refer(tenant, childRunId, parentRunId, signal);
    let copied = 0;
    // The first handle something else committed in the child before this fork's copy of it.
    let taken: string | undefined;
    let usesOwnBlobs = false;
    const copiedHandles = new Set<string>();
    await forEachPage(tenant, parentRunId, signal, async (records) => {
      const live = records.filter((record) => !isExpired(record, now()));
      for (const record of live) {
        copiedHandles.add(record.handle);
        const owner = record.blob?.ownerRunId;
        if (owner === parentRunId) usesOwnBlobs = true;
        if (owner === undefined || owners.has(owner)) continue;
        owners.add(owner);
        await refer(tenant, childRunId, owner, signal);
      }
      // Committed together, a group commit stores them as packs of records (one file for
      // many on the filesystem) instead of one object after another. Every commit is waited
      // for, failed or not, so that a fork taking back what it wrote knows all of it.
      for (let i = 0; i < live.length; i += forkCommitsInFlight) {
        const commits = await Promise.allSettled(
          live
            .slice(i, i + forkCommitsInFlight)
            .map((record) => registry.commit(recommit(record), childRunId, signal)),
        );
        for (const commit of commits) {
          if (commit.status === "rejected") continue;
          if (commit.value.created) wrote.records.push(commit.value.record);
          else taken ??= commit.value.record.handle;
        }
        const failed = commits.find((commit) => commit.status === "rejected");
        if (failed !== undefined) throw failed.reason;
      }
      copied += live.length;
    });
    if (taken !== undefined) {
      // An offload into the child committed one of the parent's handles first: the child is
      // not the parent's copy, and that output is acknowledged (the caller takes back only
      // what this fork wrote, and the child is the run those offloads made).
      throw new ConnectError(
        `run "${truncateForMessage(childRunId)}" already exists: "${truncateForMessage(taken)}" was offloaded into it while it was being forked; nothing was forked`,
        Code.AlreadyExists,
      );
    }
    // A record of the parent gone since it was copied: the parent was deleted during the
    // fork, which may have taken the bytes of what was copied before it referred to them
    // (the caller takes the copies back).
    let vanished = copiedHandles.size;
    await forEachPage(tenant, parentRunId, signal, async (records) => {
      for (const record of records) if (copiedHandles.has(record.handle)) vanished--;
    });
    if (vanished > 0) {
      throw new ConnectError(
        `run "${truncateForMessage(parentRunId)}" was deleted during the fork; nothing was forked: fork again`,
        Code.Aborted,
      );
    }
    // A DeleteRun of the child drops its references before it lists its records the last
    // time: copies committed after that listing, kept, would outlive the references that keep
    // their bytes (DATA_LOSS once those runs go).
    const referred = await Promise.all(
      [...owners].flatMap((owner) => [
        exists(ownerRefKey(tenant, childRunId, owner), signal),
        exists(forkMarkerKey(tenant, owner, childRunId), signal),
      ]),
    );
    if (referred.includes(false)) {
      throw new ConnectError(
        `run "${truncateForMessage(childRunId)}" was deleted during the fork; nothing was forked`,
        Code.Aborted,
      );
    }
    if (!usesOwnBlobs) {
      // Nothing copied uses the parent's bytes: the reference is taken back, so deleting the
      // parent frees its id as for a run no fork uses.
      await backend.delete(forkMarkerKey(tenant, parentRunId, childRunId), opt(signal));
      await backend.delete(ownerRefKey(tenant, childRunId, parentRunId), opt(signal));
      await collectIfUnreferenced(tenant, parentRunId, signal);
    }
    return copied;
  };

  return {
    expiresMs,
    meta,
    refer,
    async isDeleted(tenant, runId, signal) {
      return exists(runDeletedKey(tenant, runId), signal);
    },
    async dropTtlIfGone(tenant, runId, signal) {
      if (!(await isLive(tenant, runId, signal))) {
        await backend.delete(runTtlKey(tenant, runId), opt(signal));
      }
    },
    async setTtl(tenant, runId, ttlMs, signal) {
      const [current, live] = await Promise.all([
        expiresMs(tenant, runId, signal),
        isLive(tenant, runId, signal),
      ]);
      if (!live || (current !== undefined && current <= now())) {
        throw new ConnectError(
          `run "${truncateForMessage(runId)}" does not exist or has expired`,
          Code.NotFound,
        );
      }
      const expires = now() + ttlMs;
      const key = runTtlKey(tenant, runId);
      // Objects are create-only, so a TTL change replaces the object; the last writer wins.
      for (let attempt = 0; ; attempt++) {
        await backend.delete(key, opt(signal));
        if (current !== undefined && now() >= current) {
          // The old expiry passed before it was replaced: a read may have found the run expired
          // (reads judge by the time they began), and an expired run never comes back.
          await putJson(key, { expiresMs: current, tenant, runId }).catch(() => undefined);
          throw new ConnectError(
            `run "${truncateForMessage(runId)}" does not exist or has expired`,
            Code.NotFound,
          );
        }
        try {
          await putJson(key, { expiresMs: expires, tenant, runId }, signal);
        } catch (err) {
          if (!(err instanceof ConnectError && err.code === Code.AlreadyExists) || attempt >= 5) {
            throw err;
          }
          continue;
        }
        // A DeleteRun (or the sweep) that removed the run since the check above removed its
        // TTL before this one was written: left, it would expire the next run given this id.
        // One still under way removes this one too, last.
        if (!(await isLive(tenant, runId, signal))) {
          await backend.delete(key, opt(signal));
          throw new ConnectError(
            `run "${truncateForMessage(runId)}" does not exist or has expired`,
            Code.NotFound,
          );
        }
        return expires;
      }
    },
    async fork(tenant, parentRunId, childRunId, ttlMs, signal) {
      if (parentRunId === childRunId) {
        throw new ConnectError("child_run_id must differ from parent_run_id", Code.InvalidArgument);
      }
      const parentExpires = await expiresMs(tenant, parentRunId, signal);
      if (parentExpires !== undefined && parentExpires <= now()) {
        throw new ConnectError(`run "${parentRunId}" has expired`, Code.NotFound);
      }
      const runExists = () =>
        new ConnectError(
          `run "${truncateForMessage(childRunId)}" already exists`,
          Code.AlreadyExists,
        );
      const [childRecords, childHeld, childExpires] = await Promise.all([
        hasAny(registryPrefix(tenant, childRunId), signal),
        exists(runDeletedKey(tenant, childRunId), signal),
        expiresMs(tenant, childRunId, signal),
      ]);
      if (childRecords) throw runExists();
      if (childExpires !== undefined && childExpires <= now()) {
        // The sweep is removing a run of this id: its metadata, references and TTL go last,
        // and would take a fork's with them.
        throw new ConnectError(
          `run "${truncateForMessage(childRunId)}" has expired and awaits the sweep; use another run id`,
          Code.FailedPrecondition,
        );
      }
      if (childHeld) {
        // Its bytes go once the runs holding them let go, and with them whatever a fork given
        // the id would have stored under it: the id is not free, as Offload says of it too.
        throw new ConnectError(
          `run "${truncateForMessage(childRunId)}" was deleted and its id is still held by forks; use a new run id`,
          Code.FailedPrecondition,
        );
      }
      const meta: RunMeta = { createdMs: now(), runId: childRunId, parentRunId, ownerRefs: true };
      try {
        await putJson(runMetaKey(tenant, childRunId), meta, signal);
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.AlreadyExists) throw runExists();
        throw err;
      }
      const wrote: ForkWrites = { records: [], owners: new Set(), ttl: false };
      try {
        if (ttlMs !== undefined) {
          const ttl = { expiresMs: now() + ttlMs, tenant, runId: childRunId };
          // Taken: the TTL of a run of this id whose delete has not finished (it goes last).
          await putJson(runTtlKey(tenant, childRunId), ttl, signal).catch((err: unknown) => {
            throw err instanceof ConnectError && err.code === Code.AlreadyExists
              ? runExists()
              : err;
          });
          wrote.ttl = true;
        }
        return await copyIntoFork(tenant, parentRunId, childRunId, wrote, signal);
      } catch (err) {
        // A fork that did not finish (the store full, the call's deadline, the parent deleted
        // under it, an offload into the child first) leaves no fork: a partial one listed a
        // part of the parent as if whole, and a retry answered ALREADY_EXISTS.
        const left = await abandonFork(tenant, childRunId, wrote).then(
          () => false,
          () => true,
        );
        if (!left || !(err instanceof ConnectError)) throw err;
        throw new ConnectError(
          `${err.rawMessage}; the partial run "${truncateForMessage(childRunId)}" it left could not be deleted: delete it before forking again`,
          err.code,
          undefined,
          undefined,
          err,
        );
      }
    },
    delete: deleteRun,
  };
}
