import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Backend } from "./backends/backend.js";
import { bytesBody, readObject } from "./backends/body.js";
import { signalOption } from "./backends/call-options.js";
import {
  mergeIntentKey,
  mergeIntentPrefix,
  registryPrefix,
  runDeletedKey,
  truncateForMessage,
} from "./keys.js";
import { isExpired, type NewRecord, recommit, type StoredRecord } from "./record.js";
import type { Registry } from "./registry.js";
import { runBytesExceeded, storedRunBytes } from "./run-bytes.js";
import type { Runs } from "./runs.js";

/** MergeDeps is the state a merge reads and writes. */
export interface MergeDeps {
  readonly backend: Backend;
  readonly registry: Registry;
  readonly runs: Runs;
  readonly now: () => number;
}

/** MergeResult counts a merge's outputs. */
export interface MergeResult {
  /** Outputs the parent gained. */
  readonly merged: number;
  /** Outputs the parent already held with the same bytes. */
  readonly unchanged: number;
}

/** MergedOutput is one output a merge checked: its handle and the bytes it found there. */
export interface MergedOutput {
  readonly handle: string;
  readonly sha256: string;
  readonly sizeBytes: number;
}

/**
 * MergeIntent is a merge's journal, written before its first record: enough for any later
 * MergeRun into the parent to finish the merge (roll it forward) after a crash. It names the
 * bytes the check found under each handle, so a roll-forward writes those or nothing, even
 * when the child was deleted and its id taken by another run in the meantime.
 */
export interface MergeIntent {
  readonly id: string;
  readonly tenant: string;
  readonly childRunId: string;
  readonly parentRunId: string;
  readonly outputs: readonly MergedOutput[];
  readonly createdMs: number;
}

/**
 * An aborted merge's records are deleted by the executor that wrote them; another executor
 * deletes what is left only once the intent is this old, when no call can still be writing.
 */
const staleIntentMs = 10 * 60 * 1000;
/** The largest intent read back (a handle takes at most some 600 bytes of it). */
const maxIntentBytes = 64 * 1024 * 1024;
/**
 * Record reads and writes a merge runs at once: as many as a record pack holds, so a group commit
 * stores them as one pack (1,000 outputs merged in 1.05 s on the filesystem, 2.15 s with 16).
 */
const writesInFlight = 64;

const sameBytes = (a: MergedOutput, b: MergedOutput) =>
  a.sha256 === b.sha256 && a.sizeBytes === b.sizeBytes;

/**
 * isOwnOutput tells whether a child's record is one the child created: offloaded to it, or
 * merged into it from its own fork. Records a fork copied keep the run they were offloaded to
 * and lose any merge mark (recommit), so they never pass.
 */
export function isOwnOutput(record: StoredRecord, childRunId: string): boolean {
  return record.merge === undefined
    ? record.runId === childRunId
    : record.merge.into === childRunId;
}

function conflict(handle: string, parentRunId: string): ConnectError {
  return new ConnectError(
    `handle "${truncateForMessage(handle)}" exists in run "${truncateForMessage(parentRunId)}" with different bytes; nothing was merged`,
    Code.AlreadyExists,
  );
}

function mergeInProgress(handle: string, parentRunId: string): ConnectError {
  return new ConnectError(
    `another merge into run "${truncateForMessage(parentRunId)}" is writing handle "${truncateForMessage(handle)}"; nothing was merged, retry`,
    Code.Aborted,
  );
}

/**
 * mergeRun brings the outputs a forked child created into its parent under the same handles,
 * all or nothing (docs/design/merge-run.md):
 * - checks, before anything is written, that the child is a live fork of parentRunId
 *   (NOT_FOUND, FAILED_PRECONDITION), that no handle is held in the parent by other bytes
 *   (ALREADY_EXISTS, naming it) and that the parent stays within maxRunBytes
 *   (RESOURCE_EXHAUSTED);
 * - takes references on the bytes first (owner reference in the parent, fork marker on the
 *   owner), so deleting the child never deletes bytes the parent's records use;
 * - writes a journal (intent), then the parent's records marked with the merge, then the
 *   outcome: one create-only object that makes every record visible at once. A merge cut short
 *   is rolled forward by the next MergeRun into the parent; readers see none of it until then.
 * A handle an offload takes first makes the merge abort (ALREADY_EXISTS), and an offload that
 * meets a merge's uncommitted record is ABORTED, so exactly one of them wins.
 */
export async function mergeRun(
  deps: MergeDeps,
  tenant: string,
  childRunId: string,
  parentRunId: string,
  opts: { maxRunBytes?: number | undefined; signal?: AbortSignal },
): Promise<MergeResult> {
  const { backend, registry, runs, now } = deps;
  const { signal } = opts;
  const opt = signalOption(signal);
  const { readIntents, finish } = createMergeJournal(deps, signal);
  if (childRunId === parentRunId) {
    throw new ConnectError("child_run_id must differ from parent_run_id", Code.InvalidArgument);
  }
  const notFound = (runId: string) =>
    new ConnectError(
      `run "${truncateForMessage(runId)}" does not exist or has expired`,
      Code.NotFound,
    );

  const [meta, childHasRecords, childExpires, childDeleted] = await Promise.all([
    runs.meta(tenant, childRunId, signal),
    backend.list(registryPrefix(tenant, childRunId), { limit: 1, ...opt }),
    runs.expiresMs(tenant, childRunId, signal),
    runs.isDeleted(tenant, childRunId, signal),
  ]);
  if (
    (meta === undefined && childHasRecords.keys.length === 0) ||
    childDeleted ||
    (childExpires !== undefined && childExpires <= now())
  ) {
    throw notFound(childRunId);
  }
  if (meta?.parentRunId === undefined) {
    throw new ConnectError(
      `run "${truncateForMessage(childRunId)}" is not a fork; only a forked run merges`,
      Code.FailedPrecondition,
    );
  }
  if (meta.parentRunId !== parentRunId) {
    throw new ConnectError(
      `run "${truncateForMessage(childRunId)}" was forked from "${truncateForMessage(meta.parentRunId)}", not "${truncateForMessage(parentRunId)}"`,
      Code.FailedPrecondition,
    );
  }
  const [parentExpires, parentDeleted] = await Promise.all([
    runs.expiresMs(tenant, parentRunId, signal),
    runs.isDeleted(tenant, parentRunId, signal),
  ]);
  if (parentExpires !== undefined && parentExpires <= now()) throw notFound(parentRunId);
  if (parentDeleted) {
    throw new ConnectError(
      `run "${truncateForMessage(parentRunId)}" was deleted and its id is still held by forks`,
      Code.FailedPrecondition,
    );
  }

  // Merges into the parent that a crash left unfinished are finished first, so this one is
  // checked against the parent as they left it. Outputs one of them merged for this child
  // count as merged by this call: it is the retry that completed them.
  const recovered = new Set<string>();
  for (const intent of await readIntents(tenant, parentRunId)) {
    // A recovered merge that aborts does not fail this one: its records are taken back (or
    // wait for their executor); this merge's own check meets any that remain.
    const done = await finish(intent).catch(unlessAborted);
    if (done !== undefined && intent.childRunId === childRunId) {
      for (const handle of done.written) recovered.add(handle);
    }
  }

  // The check, before anything is written, a listed page at a time. Only what the merge needs
  // later is kept of each output (not an inline payload), so a child of many outputs costs
  // little memory.
  const toMerge: (MergedOutput & { bytes: number; owner: string | undefined })[] = [];
  let unchanged = 0;
  let merged = 0;
  let after: string | undefined;
  do {
    const page = await registry.list(tenant, childRunId, { after, limit: 500, ...opt });
    const own = page.records.filter((r) => isOwnOutput(r, childRunId) && !isExpired(r, now()));
    for (let i = 0; i < own.length; i += writesInFlight) {
      const batch = own.slice(i, i + writesInFlight);
      const held = await Promise.all(
        batch.map((r) => registry.get(tenant, parentRunId, r.handle, signal, { pending: true })),
      );
      for (const [j, record] of batch.entries()) {
        const existing = held[j];
        if (existing === undefined || isExpired(existing, now())) {
          toMerge.push({
            handle: record.handle,
            sha256: record.sha256,
            sizeBytes: record.sizeBytes,
            bytes: record.stored === "preview_only" ? 0 : record.sizeBytes,
            owner: record.blob?.ownerRunId,
          });
        } else if (!(await registry.merges.isVisible(existing, signal))) {
          throw mergeInProgress(record.handle, parentRunId);
        } else if (sameBytes(existing, record)) {
          if (recovered.has(record.handle)) merged++;
          else unchanged++;
        } else {
          throw conflict(record.handle, parentRunId);
        }
      }
    }
    after = page.nextAfter;
  } while (after !== undefined);
  if (toMerge.length === 0) {
    // Nothing to write is an answer only for a child still there: one a DeleteRun removed
    // while it was listed lists nothing, and "merged 0" would tell the caller it may now
    // delete what it never merged.
    const [stillForked, stillHeld] = await Promise.all([
      runs.meta(tenant, childRunId, signal),
      runs.isDeleted(tenant, childRunId, signal),
    ]);
    if (stillForked === undefined || stillHeld) throw notFound(childRunId);
    return { merged, unchanged };
  }
  if (opts.maxRunBytes !== undefined) {
    const adding = toMerge.reduce((sum, r) => sum + r.bytes, 0);
    const held = await storedRunBytes(registry, tenant, parentRunId, { nowMs: now(), signal });
    if (held + adding > opts.maxRunBytes) {
      throw runBytesExceeded(parentRunId, held, adding, opts.maxRunBytes);
    }
  }

  // References on the bytes go before the journal and the records, as a fork's do.
  const owners = new Set<string>();
  for (const { owner } of toMerge) if (owner !== undefined) owners.add(owner);
  for (const owner of owners) await runs.refer(tenant, parentRunId, owner, signal);
  const intent: MergeIntent = {
    id: randomUUID(),
    tenant,
    childRunId,
    parentRunId,
    outputs: toMerge.map(({ handle, sha256, sizeBytes }) => ({ handle, sha256, sizeBytes })),
    createdMs: now(),
  };
  await backend.put(
    mergeIntentKey(tenant, parentRunId, intent.id),
    bytesBody(Buffer.from(JSON.stringify(intent))),
    opt,
  );
  const done = await finish(intent, { started: true });
  return { merged: merged + done.written.length, unchanged: unchanged + done.unchanged };
}

/** MergeJournal finishes merges from their intents; mergeRun and the sweep use it. */
interface MergeJournal {
  /** The intents of merges into the run that have not finished. */
  readIntents(tenant: string, runId: string): Promise<MergeIntent[]>;
  /**
   * Rolls a merge forward to its outcome: committed (resolves with the handles this call wrote
   * or found written, and those the parent held with the same bytes), or aborted (rejects with
   * why: ALREADY_EXISTS or ABORTED). `started` is the call that wrote the intent.
   */
  finish(
    intent: MergeIntent,
    opts?: { started?: boolean },
  ): Promise<{ written: string[]; unchanged: number }>;
}

/** createMergeJournal works on deps' store, each call under signal. */
function createMergeJournal(deps: MergeDeps, signal?: AbortSignal): MergeJournal {
  const { backend, registry, now } = deps;
  const opt = signalOption(signal);

  async function readIntents(tenant: string, runId: string): Promise<MergeIntent[]> {
    const intents: MergeIntent[] = [];
    let startAfter: string | undefined;
    for (;;) {
      const page = await backend.list(mergeIntentPrefix(tenant, runId), {
        limit: 1000,
        ...(startAfter === undefined ? {} : { startAfter }),
        ...opt,
      });
      for (const key of page.keys) {
        const intent = await readIntent(backend, key, signal);
        if (intent === undefined) continue;
        if (intent.tenant !== tenant || intent.parentRunId !== runId) {
          throw new ConnectError("stored merge intent belongs to another key", Code.DataLoss);
        }
        intents.push(intent);
      }
      startAfter = page.keys.at(-1);
      if (!page.truncated || startAfter === undefined) return intents;
    }
  }

  /**
   * Rolls a merge forward: writes every record it lists that is not written yet, then decides
   * it committed, or aborted when a handle was taken by other bytes or its output is gone from
   * the child. Any number of executors may run it at once: records are create-only and carry
   * the merge's id, and the outcome is decided once.
   */
  async function finish(
    intent: MergeIntent,
    opts: { started?: boolean } = {},
  ): Promise<{ written: string[]; unchanged: number }> {
    const { id, tenant } = intent;
    const into = intent.parentRunId;
    const intentKey = mergeIntentKey(tenant, into, id);
    const decided = await registry.merges.read(tenant, into, id, signal);
    if (decided === "committed") {
      // Done before: only its journal was left. This call merged none of it.
      await backend.delete(intentKey, opt);
      return { written: [], unchanged: 0 };
    }
    if (decided === "aborted") {
      await takeBack(intent, [], false);
      throw new ConnectError(`merge ${id} was aborted`, Code.Aborted);
    }
    const created: string[] = [];
    const written: string[] = [];
    let unchanged = 0;
    let failure: ConnectError | undefined;
    for (let i = 0; i < intent.outputs.length && failure === undefined; i += writesInFlight) {
      const batch = intent.outputs.slice(i, i + writesInFlight);
      await Promise.all(
        batch.map(async (output) => {
          const { handle } = output;
          const outcome = await writeOne(intent, output);
          if (outcome.kind === "created") {
            created.push(handle);
            written.push(handle);
          } else if (outcome.kind === "mine") {
            written.push(handle);
          } else if (outcome.kind === "unchanged") {
            unchanged++;
          } else if (outcome.kind === "failed") {
            failure ??= outcome.error;
          }
        }),
      );
    }
    if (failure === undefined && !(await parentStands(intent))) {
      failure = new ConnectError(
        `run "${truncateForMessage(into)}" was deleted during the merge; nothing was merged`,
        Code.FailedPrecondition,
      );
    }
    const outcome = await registry.merges.decide(
      tenant,
      into,
      id,
      failure === undefined ? "committed" : "aborted",
      signal,
    );
    if (outcome === "committed") {
      // Committed is the answer now: a journal left behind is cleared by the next merge.
      await backend.delete(intentKey, opt).catch(() => undefined);
      return { written, unchanged };
    }
    await takeBack(intent, created, opts.started === true);
    throw failure ?? new ConnectError(`merge ${id} was aborted`, Code.Aborted);
  }

  /**
   * Whether the parent is still there to commit into, once every record is written: not
   * marked deleted (its forks keep its bytes, so a DeleteRun left it a mark and took its
   * records, and would not see these), and the intent still stands (a DeleteRun removes a
   * run's journal after its records). A DeleteRun that gets further after this check lists
   * the parent's records again and takes these with it.
   */
  async function parentStands(intent: MergeIntent): Promise<boolean> {
    const { tenant, parentRunId: into, id } = intent;
    const [deleted, journal] = await Promise.all([
      backend.head(runDeletedKey(tenant, into), opt),
      backend.head(mergeIntentKey(tenant, into, id), opt),
    ]);
    return deleted === undefined && journal !== undefined;
  }

  type Written =
    | { kind: "created" }
    | { kind: "mine" }
    | { kind: "unchanged" }
    | { kind: "failed"; error: ConnectError };

  /**
   * Writes one output's record into the parent. The child's record is read again although the
   * check read it: the intent holds only what identifies it, a roll-forward has nothing else,
   * and keeping whole records (inline payloads) from the check would cost memory per output.
   * The read also comes after the references on the bytes: a DeleteRun of the child that
   * missed them has removed the record by then, so the merge aborts instead of committing a
   * record whose bytes that delete removes.
   */
  async function writeOne(intent: MergeIntent, output: MergedOutput): Promise<Written> {
    const { tenant, id, childRunId: child, parentRunId: into } = intent;
    const { handle } = output;
    const source = await registry.get(tenant, child, handle, signal);
    // Other bytes under the handle: the child was deleted and its id reused since the check.
    if (
      source === undefined ||
      isExpired(source, now()) ||
      !isOwnOutput(source, child) ||
      !sameBytes(source, output)
    ) {
      return {
        kind: "failed",
        error: new ConnectError(
          `output "${truncateForMessage(handle)}" left run "${truncateForMessage(child)}" or changed during the merge; nothing was merged`,
          Code.Aborted,
        ),
      };
    }
    const record: NewRecord = { ...recommit(source), merge: { id, into, ms: intent.createdMs } };
    for (let attempt = 0; ; attempt++) {
      let committed: { record: StoredRecord; created: boolean };
      try {
        committed = await registry.commit(record, into, signal, { pending: true });
      } catch (err) {
        // The record that refused the write was taken back (another merge's abort) before it
        // could be read: the handle is free again. Met again, this merge aborts: left undecided,
        // a later MergeRun into the parent would commit what this call answered ABORTED.
        if (!(err instanceof ConnectError && err.code === Code.Aborted)) throw err;
        if (attempt < 2) continue;
        return { kind: "failed", error: mergeInProgress(handle, into) };
      }
      if (committed.created) return { kind: "created" };
      const existing = committed.record;
      if (existing.merge?.id === id) return { kind: "mine" };
      const visible = await registry.merges.isVisible(existing, signal);
      if (!visible) {
        // Another merge's record: in progress, or aborted and awaiting its executor's removal.
        return { kind: "failed", error: mergeInProgress(handle, into) };
      }
      if (isExpired(existing, now()) && attempt < 2) {
        await registry.removeCommit(existing, into, signal);
        continue;
      }
      return sameBytes(existing, source)
        ? { kind: "unchanged" }
        : { kind: "failed", error: conflict(handle, into) };
    }
  }

  /**
   * Takes an aborted merge back: the records this executor created at once; once the intent is
   * stale (no call can still be writing) every record of the merge, whoever wrote it, and the
   * intent. Before that only the call that started the merge clears the intent, so records an
   * executor that died wrote stay findable (by the sweep) through it.
   */
  async function takeBack(intent: MergeIntent, created: readonly string[], started: boolean) {
    const { tenant, parentRunId: into } = intent;
    // Read again, each: a DeleteRun of the parent may have removed one since, and an offload
    // committed its own output under the handle, acknowledged.
    await Promise.all(created.map((handle) => removeIfMine(intent, handle)));
    const stale = now() - intent.createdMs >= staleIntentMs;
    if (stale) for (const { handle } of intent.outputs) await removeIfMine(intent, handle);
    if (stale || started) await backend.delete(mergeIntentKey(tenant, into, intent.id), opt);
  }

  async function removeIfMine(intent: MergeIntent, handle: string) {
    const held = await registry.get(intent.tenant, intent.parentRunId, handle, signal, {
      pending: true,
    });
    if (held?.merge?.id === intent.id) {
      await registry.remove(intent.tenant, intent.parentRunId, handle, signal);
    }
  }

  return { readIntents, finish };
}

/**
 * unlessAborted resolves a finish that aborted (ALREADY_EXISTS or ABORTED: the merge is taken
 * back, not failed) with undefined and rethrows anything else.
 */
function unlessAborted(err: unknown): undefined {
  if (
    err instanceof ConnectError &&
    (err.code === Code.AlreadyExists || err.code === Code.Aborted)
  ) {
    return undefined;
  }
  throw err;
}

/**
 * readIntent reads the intent stored at key, undefined when it is gone. One the server did not
 * write there (corrupt, or naming another tenant, run or id than its key) is DATA_LOSS.
 */
async function readIntent(
  backend: Backend,
  key: string,
  signal?: AbortSignal,
): Promise<MergeIntent | undefined> {
  const bytes = await readObject(backend, key, maxIntentBytes, signal);
  if (bytes === undefined) return undefined;
  let intent: Partial<MergeIntent> | undefined;
  try {
    intent = JSON.parse(Buffer.from(bytes).toString()) as Partial<MergeIntent>;
  } catch {
    intent = undefined;
  }
  if (
    typeof intent?.tenant !== "string" ||
    typeof intent.parentRunId !== "string" ||
    typeof intent.id !== "string" ||
    typeof intent.childRunId !== "string" ||
    typeof intent.createdMs !== "number" ||
    !Array.isArray(intent.outputs) ||
    key !== mergeIntentKey(intent.tenant, intent.parentRunId, intent.id)
  ) {
    throw new ConnectError("stored merge intent belongs to another key", Code.DataLoss);
  }
  return intent as MergeIntent;
}

/**
 * finishStaleMerge rolls forward the merge whose intent is stored at key (a merge-intent key a
 * listing returned) when the intent is older than staleIntentMs: a merge a crash cut short and
 * no MergeRun retried, whose handles must not stay held. A merge that must abort is taken back
 * as in finish. Resolves true when the intent was stale; DATA_LOSS for an intent the server did
 * not write there, which is followed nowhere.
 */
export async function finishStaleMerge(
  deps: MergeDeps,
  key: string,
  signal?: AbortSignal,
): Promise<boolean> {
  const intent = await readIntent(deps.backend, key, signal);
  if (intent === undefined || deps.now() - intent.createdMs < staleIntentMs) return false;
  await createMergeJournal(deps, signal).finish(intent).catch(unlessAborted);
  return true;
}
