import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@spillway/proto/spillway/v1/types_pb.js";
import type { Backend } from "./backends/backend.js";
import { readAllBytes } from "./backends/body.js";
import {
  decodeJsonViewIndexEntry,
  type JsonCheckpoint,
  jsonViewIndexEntryRange,
} from "./json/json-view-index.js";
import { isRetryHandle, parseHandle, truncateForMessage } from "./keys.js";
import { isExpired, type StoredRecord } from "./record.js";
import type { Registry } from "./registry.js";
import type { Runs } from "./runs.js";
import { findBlocksOnThreads } from "./window/find-blocks.js";
import { createLineAnchors } from "./window/line-anchors.js";
import { decodeLineIndexEntries, lineIndexEntryRange } from "./window/line-index.js";
import { sharedScanPool } from "./window/scan-pool.js";
import {
  createBufferWindowSource,
  type JsonViewSource,
  notJsonReason,
  type WindowSource,
} from "./window/source.js";

/** ResolvedHandle is a visible record and the run expiry that also bounds it. */
export interface ResolvedHandle {
  readonly record: StoredRecord;
  readonly runExpiresMs: number | undefined;
}

/** invalidHandle is the one answer for every handle a run may not read. */
export function invalidHandle(handle: string, runId: string): ConnectError {
  return new ConnectError(
    `invalid_deferred_handle: "${truncateForMessage(handle)}" is not a handle recorded in run "${truncateForMessage(runId)}"`,
    Code.PermissionDenied,
    undefined,
    [
      {
        desc: ErrorInfoSchema,
        value: create(ErrorInfoSchema, { reason: "invalid_deferred_handle" }),
      },
    ],
  );
}

/**
 * resolveHandle turns an untrusted handle into a record through the reading run's own
 * registry, and nothing else: a handle never becomes a storage key. Unknown, foreign, forged
 * and expired handles all get the same PERMISSION_DENIED (`invalid_deferred_handle`), so the
 * answer says nothing about other runs or tenants. A retry-form handle no key makes
 * (`res@1_x`, `res@01_x`, `res@1001_x`, `res@_x`, `res@2x_y`: see parseHandle) gets that same
 * answer without a store read, since no record can hold it.
 */
export async function resolveHandle(
  registry: Registry,
  runs: Runs,
  tenant: string,
  runId: string,
  handle: string,
  nowMs: number,
  signal?: AbortSignal,
): Promise<ResolvedHandle> {
  if (isRetryHandle(handle) && parseHandle(handle) === undefined) {
    throw invalidHandle(handle, runId);
  }
  const [record, runExpiresMs] = await Promise.all([
    registry.get(tenant, runId, handle, signal),
    runs.expiresMs(tenant, runId, signal),
  ]);
  if (
    record === undefined ||
    isExpired(record, nowMs) ||
    (runExpiresMs !== undefined && runExpiresMs <= nowMs)
  ) {
    throw invalidHandle(handle, runId);
  }
  return { record, runExpiresMs };
}

/** Most index entries a seek reads to bound a window's bytes (a 512-byte read). */
const maxSpanEntries = 63;

/**
 * A stored object of a record, got from the backend. One the store says is missing while its
 * record still stands (`recheck` resolves) was lost behind the server's back: DATA_LOSS naming
 * the output, not the storage key. When the record went meanwhile (a DeleteRun racing the
 * read), recheck's refusal is the answer, as for any handle that is no longer readable.
 */
async function getStored(
  backend: Backend,
  key: string,
  opts: Parameters<Backend["get"]>[1],
  what: string,
  recheck: () => Promise<unknown>,
): Promise<AsyncIterable<Uint8Array>> {
  try {
    return await backend.get(key, opts);
  } catch (err) {
    if (!(err instanceof ConnectError) || err.code !== Code.NotFound) throw err;
    await recheck();
    throw new ConnectError(`${what} is missing from the store`, Code.DataLoss);
  }
}

/**
 * windowSourceFor exposes a readable record to the window engine: inline bytes from the
 * record, blob bytes through ranged backend reads, line seeks through one small ranged read of
 * the line index (the entries where a window's lines start and end), anchors by streaming that
 * index in order. A stored object the store has lost is DATA_LOSS while `recheck` (which
 * resolves while the record is still readable, and rejects with the answer for it otherwise)
 * says the record stands.
 */
export function windowSourceFor(
  backend: Backend,
  record: StoredRecord,
  recheck: () => Promise<unknown>,
): WindowSource {
  if (record.stored === "preview_only") {
    throw new ConnectError(
      `"${record.handle}" was stored as preview only; its bytes cannot be read`,
      Code.FailedPrecondition,
    );
  }
  if (record.stored === "inline" || record.blob === undefined) {
    return {
      ...createBufferWindowSource(
        record.handle,
        record.contentType,
        Buffer.from(record.inline ?? "", "base64"),
        record.binary,
      ),
      payloadId: record.sha256,
    };
  }
  const blob = record.blob;
  const openLocal = backend.openLocal?.bind(backend);
  const name = `"${truncateForMessage(record.handle)}"`;
  return {
    json: storedJsonView(backend, record, recheck),
    handle: record.handle,
    contentType: record.contentType,
    size: record.sizeBytes,
    lineCount: record.lineCount,
    binary: record.binary,
    payloadId: record.sha256,
    read: async (offset, length, signal) => {
      // Bounded by the recorded size, and checked against it: the stored object may have been
      // cut short or grown behind the server's back, and a window must not say more follows.
      const want = Math.max(
        0,
        Math.min(length ?? Number.MAX_SAFE_INTEGER, record.sizeBytes - offset),
      );
      const body = await getStored(
        backend,
        blob.key,
        { offset, length: want, ...(signal === undefined ? {} : { signal }) },
        `the stored payload of ${name}`,
        recheck,
      );
      return releaseOnAbort(exactly(body, want, record.handle), signal);
    },
    release: (chunk) => backend.release?.(chunk),
    ...(openLocal === undefined
      ? {}
      : {
          async *findBlocks(query, signal) {
            const unknown = { to: record.sizeBytes, blocks: undefined };
            // A failure here only costs the shortcut: the search then reads every byte, and
            // meets (and reports) whatever stopped this.
            const local = await openLocal(blob.key, signal === undefined ? {} : { signal }).catch(
              () => undefined,
            );
            if (local === undefined) {
              yield unknown;
              return;
            }
            try {
              // A file cut short is for the reads to find and report (DATA_LOSS), not to skip.
              if (local.size < record.sizeBytes) {
                yield unknown;
                return;
              }
              // The pool's threads take turns by tenant: one tenant's many searches must not
              // hold them while another's waits.
              const found = findBlocksOnThreads(
                sharedScanPool(),
                record.tenant,
                local.fd,
                record.sizeBytes,
                query,
                signal,
              );
              let failed = false;
              try {
                yield* found;
              } catch {
                failed = true;
              }
              if (failed) yield unknown;
            } finally {
              await local.close().catch(() => undefined);
            }
          },
        }),
    async seekLine(line, signal, lines) {
      if (blob.indexKey === undefined) return { line: 0, offset: 0 };
      const first = Math.floor(line / blob.stride);
      // The entry of the first indexed line at or after line + lines, when one exists and
      // lies close enough to fetch with the first in one small read.
      const endLine =
        lines === undefined ? undefined : Math.ceil((line + lines) / blob.stride) * blob.stride;
      const last =
        endLine !== undefined &&
        endLine < record.lineCount &&
        endLine / blob.stride - first <= maxSpanEntries
          ? endLine / blob.stride
          : first;
      if (last === 0) return { line: 0, offset: 0 };
      const range = lineIndexEntryRange(first);
      const length = range.length * (last - first + 1);
      const bytes = await readAllBytes(
        await getStored(
          backend,
          blob.indexKey,
          { offset: range.offset, length, ...(signal === undefined ? {} : { signal }) },
          `the line index of ${name}`,
          recheck,
        ),
        length,
      );
      if (bytes.byteLength !== length) {
        throw new ConnectError(`line index of "${record.handle}" is truncated`, Code.DataLoss);
      }
      const entries = Buffer.from(bytes.buffer, bytes.byteOffset, length);
      return {
        line: first * blob.stride,
        offset: entries.readDoubleLE(0),
        ...(last > first ? { end: entries.readDoubleLE(length - 8) } : {}),
      };
    },
    lineAnchors(signal) {
      const { indexKey } = blob;
      return createLineAnchors(
        blob.stride,
        (async function* () {
          if (indexKey === undefined) return;
          const body = await getStored(
            backend,
            indexKey,
            signal === undefined ? {} : { signal },
            `the line index of ${name}`,
            recheck,
          );
          yield* decodeLineIndexEntries(releaseOnAbort(body, signal));
        })(),
      );
    },
  };
}

/**
 * exactly passes body on and fails with DATA_LOSS when it ends before `want` bytes: the stored
 * payload is shorter than its record says. A reader that stops early is not checked.
 */
async function* exactly(
  body: AsyncIterable<Uint8Array>,
  want: number,
  handle: string,
): AsyncGenerator<Uint8Array> {
  let seen = 0;
  for await (const chunk of body) {
    seen += chunk.byteLength;
    yield chunk;
  }
  if (seen < want) {
    throw new ConnectError(
      `stored payload of "${truncateForMessage(handle)}" is shorter than its record says`,
      Code.DataLoss,
    );
  }
}

/**
 * releaseOnAbort closes a body's source (its file handle or HTTP response) as soon as the
 * signal aborts. A reader that cancels leaves the window generator suspended mid-stream, where
 * its own cleanup would only run if it were resumed; the abort must free the source instead.
 */
function releaseOnAbort(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
): AsyncIterable<Uint8Array> {
  if (signal === undefined) return body;
  const iterator = body[Symbol.asyncIterator]();
  const release = () => {
    void iterator.return?.()?.catch(() => undefined);
  };
  if (signal.aborted) release();
  else signal.addEventListener("abort", release, { once: true });
  return {
    [Symbol.asyncIterator]: () => ({
      next: () => iterator.next(),
      return: async (value?: unknown) => {
        signal.removeEventListener("abort", release);
        return (await iterator.return?.(value)) ?? { done: true, value: undefined };
      },
    }),
  };
}

/**
 * storedJsonView serves the JSON view of a blob record: a seek reads one 32-byte checkpoint
 * with a ranged read of the JSON view index (a few more only where the document nests deeper
 * than jsonCheckpointMaxDepth for over a stride of lines). A record offloaded before JSON views
 * were indexed has none: re-indexing a blob of any size on a read is not bounded, so the
 * window says to offload it again.
 */
function storedJsonView(
  backend: Backend,
  record: StoredRecord,
  recheck: () => Promise<unknown>,
): JsonViewSource | { readonly unavailable: string } {
  const json = record.json;
  if (json === undefined) {
    return {
      unavailable: `"${truncateForMessage(record.handle)}" was offloaded before this server indexed JSON views; offload it again as a new output (another call id, or the next attempt: the same key answers the old record) to read its JSON view`,
    };
  }
  if (json.kind === "none") {
    const why = typeof json.reason === "string" ? truncateForMessage(json.reason, 120) : undefined;
    return { unavailable: notJsonReason(truncateForMessage(record.handle), why) };
  }
  const indexKey = record.blob?.jsonIndexKey;
  const start: JsonCheckpoint = { line: 0, offset: 0, stack: [] };
  const entryAt = async (k: number, signal: AbortSignal | undefined) => {
    if (k === 0 || indexKey === undefined) return start;
    const range = jsonViewIndexEntryRange(k);
    const bytes = await readAllBytes(
      await getStored(
        backend,
        indexKey,
        { offset: range.offset, length: range.length, ...(signal === undefined ? {} : { signal }) },
        `the JSON view index of "${truncateForMessage(record.handle)}"`,
        recheck,
      ),
      range.length,
    );
    return decodeJsonViewIndexEntry(bytes);
  };
  return {
    kind: json.kind,
    viewLines: json.viewLines,
    async seek(line, signal) {
      let k = Math.min(Math.floor(line / Math.max(1, json.stride)), json.checkpoints - 1);
      for (;;) {
        const checkpoint = await entryAt(Math.max(0, k), signal);
        if (checkpoint.line <= line || k <= 0) return checkpoint;
        k--;
      }
    },
  };
}
