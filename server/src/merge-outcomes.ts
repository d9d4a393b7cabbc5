import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend } from "./backends/backend.js";
import { bytesBody, raceAbort, readObject } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import { mergeOutcomeKey } from "./keys.js";
import type { StoredRecord } from "./record.js";

/** MergeOutcome is a merge's decision: its records all become visible, or none ever does. */
export type MergeOutcome = "committed" | "aborted";

/** MergeOutcomes reads and decides merge outcomes (mergeOutcomeKey), one object per merge. */
export interface MergeOutcomes {
  /** The merge's outcome, or undefined while it is undecided. */
  read(
    tenant: string,
    into: string,
    mergeId: string,
    signal?: AbortSignal,
  ): Promise<MergeOutcome | undefined>;
  /**
   * Decides a merge create-only: resolves with the outcome that holds, this one or the one
   * another executor of the same merge wrote first.
   */
  decide(
    tenant: string,
    into: string,
    mergeId: string,
    outcome: MergeOutcome,
    signal?: AbortSignal,
  ): Promise<MergeOutcome>;
  /** True for a record without a merge mark, or whose merge committed. */
  isVisible(record: StoredRecord, signal?: AbortSignal): Promise<boolean>;
}

/** Outcome keys known committed; an outcome never changes and merge ids are never reused. */
const maxCachedCommits = 10_000;

/** createMergeOutcomes keeps merge outcomes in backend, remembering the committed ones. */
export function createMergeOutcomes(backend: Backend): MergeOutcomes {
  const committed = new Set<string>();
  /**
   * Reads under way, by key: a listing shows many records of one merge at once, and each would
   * otherwise read the same outcome before the first read fills the cache. The shared read
   * runs without any caller's signal, so one caller giving up fails none of the others.
   */
  const reading = new Map<string, Promise<MergeOutcome | undefined>>();

  const read: MergeOutcomes["read"] = async (tenant, into, mergeId, signal) => {
    const key = mergeOutcomeKey(tenant, into, mergeId);
    if (committed.has(key)) return "committed";
    let shared = reading.get(key);
    if (shared === undefined) {
      shared = readStored(key).finally(() => reading.delete(key));
      reading.set(key, shared);
    }
    return signal === undefined ? shared : raceAbort(shared, signal);
  };

  const readStored = async (key: string): Promise<MergeOutcome | undefined> => {
    const bytes = await readObject(backend, key, 4096);
    if (bytes === undefined) return undefined;
    let outcome: unknown;
    try {
      outcome = (JSON.parse(Buffer.from(bytes).toString()) as { outcome?: unknown }).outcome;
    } catch {
      throw new ConnectError("stored merge outcome is corrupt", Code.DataLoss);
    }
    if (outcome !== "committed" && outcome !== "aborted") {
      throw new ConnectError("stored merge outcome is corrupt", Code.DataLoss);
    }
    if (outcome === "committed") {
      if (committed.size >= maxCachedCommits) committed.clear();
      committed.add(key);
    }
    return outcome;
  };

  return {
    read,
    async decide(tenant, into, mergeId, outcome, signal) {
      const body = Buffer.from(JSON.stringify({ outcome, mergeId }));
      try {
        await backend.put(mergeOutcomeKey(tenant, into, mergeId), bytesBody(body), {
          ...signalOption(signal),
        });
        return outcome;
      } catch (err) {
        if (!(err instanceof ConnectError && err.code === Code.AlreadyExists)) throw err;
      }
      // A read of its own: a shared one may have started before the outcome was written.
      const fresh = readStored(mergeOutcomeKey(tenant, into, mergeId));
      const held = await (signal === undefined ? fresh : raceAbort(fresh, signal));
      if (held === undefined) {
        throw new ConnectError("merge outcome vanished while it was decided; retry", Code.Aborted);
      }
      return held;
    },
    async isVisible(record, signal) {
      const merge = record.merge;
      if (merge === undefined) return true;
      if (typeof merge.id !== "string" || typeof merge.into !== "string") {
        throw new ConnectError("stored record has a corrupt merge mark", Code.DataLoss);
      }
      return (await read(record.tenant, merge.into, merge.id, signal)) === "committed";
    },
  };
}
