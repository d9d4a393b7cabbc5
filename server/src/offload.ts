import { createHash, randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type OffloadHeader,
  OffloadHeaderSchema,
  type OffloadRequest,
  OffloadRequestSchema,
  type OffloadResponse,
  OffloadResponseSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { Backend } from "./backends/backend.js";
import { bytesBody } from "./backends/body.js";
import { markFault } from "./call-fault.js";
import { type CpuSlice, type CpuTurns, inPieces } from "./cpu-turns.js";
import { createIdleStreamReader, type IdleStreamReader } from "./idle-stream.js";
import { createJsonViewIndexer, encodeJsonViewIndex } from "./json/json-view-index.js";
import {
  attemptOf,
  blobKey,
  checkSlotPath,
  handleFor,
  jsonIndexKey,
  lineIndexKey,
  runDeletedKey,
  truncateForMessage,
} from "./keys.js";
import { limitsForTenant, type ServerLimits, type TenantLimits } from "./limits.js";
import { createPreviewBuilder } from "./preview/preview-builder.js";
import { createTextSniffer } from "./preview/text-sniffer.js";
import {
  type Base64,
  isExpired,
  type NewRecord,
  type StoredRecord,
  toAttachment,
  toBase64,
} from "./record.js";
import type { Registry } from "./registry.js";
import { runBytesExceeded, storedRunBytes } from "./run-bytes.js";
import type { Runs } from "./runs.js";
import { validateRequest } from "./validation.js";
import { createLineIndexer, encodeLineIndex } from "./window/line-index.js";

/** OffloadDeps are what an offload needs from the server. */
export interface OffloadDeps {
  readonly backend: Backend;
  readonly registry: Registry;
  readonly runs: Runs;
  readonly limits: ServerLimits;
  readonly now: () => number;
  readonly turns: CpuTurns;
}

/**
 * offload commits one Offload stream for tenant and returns the committed record.
 *
 * Bytes stream to the backend while sha256, size, line index, text/binary sniffing and the
 * preview are computed in the same pass; nothing is buffered beyond the inline limit. The
 * create-only registry write is the commit point: a failure or cancellation before it leaves
 * nothing visible (the partial blob is deleted), and an identical retry returns the record
 * already committed.
 *
 * With a run limit (`maxRunBytes`, the server's or the tenant's), an offload that would take its
 * run past the limit is refused with RESOURCE_EXHAUSTED before anything is committed: at once
 * when the header's expected size is already too large, as soon as the streamed bytes pass the
 * room the run had when the stream began, and once more right before the commit against what
 * the run holds then. Replays of a committed record are never refused.
 */
export async function offload(
  deps: OffloadDeps,
  tenant: string,
  requests: AsyncIterable<OffloadRequest>,
  signal: AbortSignal,
  tenantLimits: TenantLimits = {},
  releaseChunk?: (bytes: Uint8Array) => void,
): Promise<OffloadResponse> {
  const reader = createIdleStreamReader(
    requests[Symbol.asyncIterator](),
    deps.limits.idleStreamMs,
    signal,
    "the Offload stream",
  );
  try {
    return await offloadFrom(deps, tenant, reader, signal, tenantLimits, releaseChunk);
  } finally {
    reader.close();
  }
}

/** WholeOptions tune offloadWhole. */
export interface WholeOptions {
  /** The tenant's own limits from the token file. */
  readonly tenantLimits?: TenantLimits;
  /** Look the handle up before writing (default true); see offloadWhole. */
  readonly lookUpFirst?: boolean;
  /**
   * Hears the answer a commit is about to give, before the record is written: a rejection
   * refuses the offload with nothing committed (its blob, if any, removed). Replays of a record
   * committed earlier answer without it.
   */
  readonly beforeCommit?: (answer: OffloadResponse) => Promise<void>;
}

/**
 * offloadWhole commits one payload that arrived whole (an OffloadBatch item) exactly as an
 * Offload stream of its header and one chunk of data would be committed: the same
 * validation, limits, idempotency and commit point, without a stream to wait on.
 *
 * With `lookUpFirst` false, a payload small enough to be stored inline is committed without
 * looking its handle up first when no run limit applies: its record holds its bytes and no
 * blob is written, so its create-only commit finds a committed record instead (the write is
 * refused and the record read). Only the cost differs: a first offload saves a lookup, a
 * replay pays for a refused write. The answer is the same either way.
 */
export function offloadWhole(
  deps: OffloadDeps,
  tenant: string,
  header: OffloadHeader,
  data: Uint8Array,
  signal: AbortSignal,
  opts: WholeOptions = {},
): Promise<OffloadResponse> {
  const messages: OffloadRequest[] = [
    create(OffloadRequestSchema, { msg: { case: "header", value: header } }),
    create(OffloadRequestSchema, { msg: { case: "chunk", value: data } }),
  ];
  let at = 0;
  const reader: IdleStreamReader<OffloadRequest> = {
    next: () => {
      const value = messages[at++];
      return Promise.resolve(
        value === undefined ? { done: true, value: undefined } : { done: false, value },
      );
    },
    close: () => undefined,
  };
  return offloadFrom(deps, tenant, reader, signal, opts.tenantLimits ?? {}, undefined, {
    ...(opts.lookUpFirst === false ? { bytes: data.byteLength } : {}),
    ...(opts.beforeCommit === undefined ? {} : { beforeCommit: opts.beforeCommit }),
  });
}

/**
 * isCommitted reports whether the handle a well-formed, valid header of tenant names holds a
 * live (unexpired) record. A header that is not (it fails validation, names another tenant or
 * a bad slot or attempt) or a lookup that fails answers true: the caller then takes the path
 * that looks every handle up.
 */
export async function isCommitted(
  deps: OffloadDeps,
  tenant: string,
  header: OffloadHeader | undefined,
  signal: AbortSignal,
): Promise<boolean> {
  if (header === undefined) return true;
  try {
    const { key, handle } = checkHeader(header, tenant);
    return (await liveRecord(deps, tenant, key.runId, handle, signal)) !== undefined;
  } catch {
    return true;
  }
}

/**
 * checkHeader checks an offload's header for tenant (its declared rules, its key's tenant, its
 * slot path and attempt) and returns its key and the handle it commits under; a failure throws
 * the status the Offload answers with.
 */
function checkHeader(
  header: OffloadHeader,
  tenant: string,
): { key: NonNullable<OffloadHeader["key"]>; attempt: number; handle: string } {
  validateRequest(OffloadHeaderSchema, header, "header.");
  const key = header.key;
  if (key === undefined) throw new ConnectError("header.key: required", Code.InvalidArgument);
  if (key.tenant !== tenant) {
    // Both are checked names (validated key, authenticated tenant), safe to echo to the caller.
    throw new ConnectError(
      `header.key.tenant: "${key.tenant}" is not the caller's tenant "${tenant}" (the tenant comes from the bearer token)`,
      Code.PermissionDenied,
    );
  }
  if (header.slot !== undefined) checkSlotPath(header.slot);
  // Each attempt of a call is its own output under its own handle; 0 and 1 are the first.
  const attempt = attemptOf(key.attempt);
  return { key, attempt, handle: handleFor(key.callId, header.slot, attempt) };
}

/** The record committed under handle, unless there is none or it has expired (the commit replaces an expired one). */
async function liveRecord(
  deps: OffloadDeps,
  tenant: string,
  runId: string,
  handle: string,
  signal: AbortSignal,
): Promise<StoredRecord | undefined> {
  const found = await deps.registry.get(tenant, runId, handle, signal);
  return found === undefined || isExpired(found, deps.now()) ? undefined : found;
}

/**
 * offloadFrom is offload on a stream whose reader enforces the idle limit. A store's NOT_FOUND
 * while it writes (the filesystem's directory of the run pruned by a concurrent DeleteRun, time
 * after time) is ABORTED: nothing of the offload was committed, and sending it again stores it
 * in the run as it now is. The store's message, which names its keys, stays in the cause.
 */
async function offloadFrom(
  ...args: Parameters<typeof offloadFromStream>
): Promise<OffloadResponse> {
  try {
    return await offloadFromStream(...args);
  } catch (err) {
    if (!(err instanceof ConnectError && err.code === Code.NotFound)) throw err;
    throw new ConnectError(
      "what this offload was writing was removed by a concurrent DeleteRun of its run; nothing of it was kept: send it again",
      Code.Aborted,
      undefined,
      undefined,
      err,
    );
  }
}

async function offloadFromStream(
  deps: OffloadDeps,
  tenant: string,
  reader: IdleStreamReader<OffloadRequest>,
  signal: AbortSignal,
  tenantLimits: TenantLimits,
  releaseChunk: ((bytes: Uint8Array) => void) | undefined,
  whole: {
    /** The size of a payload that came whole and need not be looked up first (offloadWhole). */
    readonly bytes?: number;
    readonly beforeCommit?: WholeOptions["beforeCommit"];
  } = {},
): Promise<OffloadResponse> {
  const first = await reader.next();
  if (first.done === true || first.value.msg.case !== "header") {
    throw new ConnectError(
      first.done === true
        ? "the Offload stream ended before its header"
        : "the first Offload message must be a header",
      Code.InvalidArgument,
    );
  }
  const header = first.value.msg.value;
  const { key, attempt, handle } = checkHeader(header, tenant);

  const limits = limitsForTenant(deps.limits, tenantLimits);
  // A payload announced as too large is refused before any of it is sent or anything is read.
  if (header.expectedSize !== undefined && header.expectedSize > BigInt(limits.maxBlobBytes)) {
    throw new ConnectError(
      `payload of header.expected_size ${header.expectedSize} bytes exceeds max_blob_bytes ${limits.maxBlobBytes}`,
      Code.ResourceExhausted,
    );
  }
  const { maxRunBytes } = limits;
  const runBytes = (exceptHandle?: string) =>
    storedRunBytes(deps.registry, tenant, key.runId, {
      nowMs: deps.now(),
      signal,
      ...(exceptHandle === undefined ? {} : { exceptHandle }),
    });
  const lookUp = () => liveRecord(deps, tenant, key.runId, handle, signal);
  // The record is looked up before anything is written: a replay (an SDK's retry) then only
  // hashes its bytes and compares, instead of writing a record or a blob that the create-only
  // commit refuses. A run limit must know it too. A payload known whole and small enough to be
  // inline leaves no blob behind, so without a run limit its commit alone can find a replay
  // (see offloadWhole's lookUpFirst).
  // Independent lookups: one round trip to the store, not several.
  const inlineWithoutLookup =
    whole.bytes !== undefined &&
    whole.bytes <= deps.limits.inlineBytes &&
    maxRunBytes === undefined;
  const [deleted, runExpires, recorded, heldAtStart] = await Promise.all([
    deps.runs.isDeleted(tenant, key.runId, signal),
    deps.runs.expiresMs(tenant, key.runId, signal),
    inlineWithoutLookup ? undefined : lookUp(),
    maxRunBytes === undefined ? 0 : runBytes(handle),
  ]);
  if (deleted) {
    throw new ConnectError(
      `run "${key.runId}" was deleted and its id is still held by forks; use a new run id`,
      Code.FailedPrecondition,
    );
  }
  if (runExpires !== undefined && runExpires <= deps.now()) {
    // Every read of an expired run is refused until the sweep removes it, so a record
    // committed now would be acknowledged and then lost.
    throw new ConnectError(
      `run "${truncateForMessage(key.runId)}" has expired and awaits the sweep; nothing was stored: use another run id`,
      Code.FailedPrecondition,
    );
  }

  if (recorded !== undefined) {
    // A replay only compares: the digest and size decide, so nothing else is computed.
    const digest = createDigestPass();
    const turns = { slice: deps.turns.begin(tenant), signal };
    await drain(chunkStream(reader, limits, header, digest, undefined, releaseChunk, turns));
    const facts = digest.finish();
    checkDeclared(header, facts);
    return replayStanding(
      deps,
      recorded,
      header,
      facts,
      { runId: key.runId, expiresMs: runExpires },
      signal,
    );
  }
  const pass = createPass(deps.limits, header, handle, attempt);
  const keepsBytes = !header.previewOnly;
  const runRoom =
    maxRunBytes === undefined || !keepsBytes
      ? undefined
      : { runId: key.runId, held: heldAtStart, limit: maxRunBytes };
  if (
    runRoom !== undefined &&
    header.expectedSize !== undefined &&
    runRoom.held + Number(header.expectedSize) > runRoom.limit
  ) {
    throw runBytesExceeded(key.runId, runRoom.held, Number(header.expectedSize), runRoom.limit);
  }
  const turns = { slice: deps.turns.begin(tenant), signal };
  const chunks = chunkStream(reader, limits, header, pass, runRoom, releaseChunk, turns);
  // Right before the commit the run is measured again: offloads that committed to it while
  // this one streamed count too, which narrows concurrent overshoot to commits racing this check.
  const checkRunRoom = async (size: number) => {
    if (runRoom === undefined) return;
    const held = await runBytes(handle);
    if (held + size > runRoom.limit) throw runBytesExceeded(key.runId, held, size, runRoom.limit);
  };
  if (!keepsBytes) {
    // A preview-only record keeps none of the bytes, only what the pass makes of them.
    await drain(chunks);
    const facts = pass.finish();
    const placement = { stored: "preview_only" } as const;
    return commit(deps, tenant, header, handle, facts, placement, signal, whole.beforeCommit);
  }
  const stream = chunks[Symbol.asyncIterator]();

  const head: Uint8Array[] = [];
  let headBytes = 0;
  let ended = false;
  while (headBytes <= deps.limits.inlineBytes) {
    const next = await stream.next();
    if (next.done === true) {
      ended = true;
      break;
    }
    headBytes += next.value.byteLength;
    // A chunk kept while the stream is read on is copied (at most inlineBytes in all): the
    // stream takes a chunk back once the next one is asked for.
    head.push(headBytes <= deps.limits.inlineBytes ? Uint8Array.from(next.value) : next.value);
  }
  if (ended) {
    const facts = pass.finish();
    await checkRunRoom(facts.size);
    const inline = toBase64(Buffer.concat(head));
    const placement = { stored: "inline", inline } as const;
    return commit(deps, tenant, header, handle, facts, placement, signal, whole.beforeCommit);
  }
  const uploadId = `${deps.now().toString(36)}-${randomBytes(8).toString("hex")}`;
  const key_ = blobKey(tenant, key.runId, key.callId, header.slot, uploadId, attempt);
  let indexKey: string | undefined;
  let jsonKey: string | undefined;
  try {
    await deps.backend.put(key_, concatStreams(head, stream), { signal });
    const facts = pass.finish();
    if (facts.index.offsets.length > 1) {
      indexKey = lineIndexKey(key_);
      await deps.backend.put(indexKey, bytesBody(encodeLineIndex(facts.index)), { signal });
    }
    if (facts.jsonIndex !== undefined && facts.jsonIndex.count > 1) {
      jsonKey = jsonIndexKey(key_);
      await deps.backend.put(jsonKey, bytesBody(encodeJsonViewIndex(facts.jsonIndex)), { signal });
    }
    await checkRunRoom(facts.size);
    const blob = {
      key: key_,
      stride: facts.index.stride,
      ownerRunId: key.runId,
      ...(indexKey === undefined ? {} : { indexKey }),
      ...(jsonKey === undefined ? {} : { jsonIndexKey: jsonKey }),
    };
    const response = await commit(
      deps,
      tenant,
      header,
      handle,
      facts,
      { stored: "blob", blob },
      signal,
      whole.beforeCommit,
    );
    if (!response.created) await removeQuietly(deps.backend, key_, indexKey, jsonKey);
    return response;
  } catch (err) {
    await removeQuietly(
      deps.backend,
      key_,
      indexKey ?? lineIndexKey(key_),
      jsonKey ?? jsonIndexKey(key_),
    );
    throw err;
  }
}

interface PassFacts {
  readonly sha256: string;
  readonly size: number;
  readonly binary: boolean;
  readonly lineCount: number;
  readonly index: ReturnType<ReturnType<typeof createLineIndexer>["finish"]>;
  /** The JSON view's index; undefined when the payload is neither JSON nor JSON Lines. */
  readonly jsonIndex: ReturnType<ReturnType<typeof createJsonViewIndexer>["finish"]>;
  /** Why the payload has no JSON view, when it has none. */
  readonly notJsonReason: string;
  readonly preview: ReturnType<ReturnType<typeof createPreviewBuilder>["finish"]>;
}

/** What a pass over the payload computes as the chunks go by. */
interface Pass<Facts extends DigestFacts = PassFacts> {
  push(chunk: Uint8Array): void;
  readonly size: () => number;
  finish(): Facts;
}

/** What every pass computes: all a replay compares. */
type DigestFacts = Pick<PassFacts, "sha256" | "size">;

/** A pass computing the digest and size alone (a replay's). */
function createDigestPass(): Pass<DigestFacts> {
  const hash = createHash("sha256");
  let size = 0;
  return {
    push(chunk) {
      hash.update(chunk);
      size += chunk.byteLength;
    },
    size: () => size,
    finish: () => ({ sha256: hash.digest("hex"), size }),
  };
}

/** Reads a stream of chunks to its end, keeping none of them (a pass has seen each). */
async function drain(chunks: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const _ of chunks) {
    // Each chunk has gone through the pass by the time it is yielded.
  }
}

/** The single pass over the payload: digest, size, line index, sniffing and preview. */
function createPass(
  limits: ServerLimits,
  header: OffloadHeader,
  handle: string,
  attempt: number,
): Pass {
  const digest = createDigestPass();
  const indexer = createLineIndexer(limits.indexStride);
  const sniffer = createTextSniffer();
  const jsonIndexer = createJsonViewIndexer({
    contentType: header.contentType,
    ...(limits.jsonViewStride === undefined ? {} : { stride: limits.jsonViewStride }),
  });
  const preview = createPreviewBuilder({
    contentType: header.contentType,
    ...(header.preview?.headChars === undefined ? {} : { headChars: header.preview.headChars }),
    ...(header.preview?.tailChars === undefined ? {} : { tailChars: header.preview.tailChars }),
    keepAnsi: header.preview?.keepAnsi === true,
  });
  return {
    push(chunk) {
      digest.push(chunk);
      indexer.push(chunk);
      jsonIndexer.push(chunk);
      sniffer.push(chunk);
      preview.push(chunk);
    },
    size: digest.size,
    finish() {
      const index = indexer.finish();
      const { binary } = sniffer.finish();
      const { sha256, size } = digest.finish();
      return {
        sha256,
        size,
        binary,
        lineCount: index.lineCount,
        index,
        jsonIndex: jsonIndexer.finish(),
        notJsonReason: jsonIndexer.notJsonReason(),
        preview: preview.finish({
          binary,
          lineCount: index.lineCount,
          size,
          handle,
          name: header.name,
          attempt,
          readable: !header.previewOnly,
        }),
      };
    },
  };
}

/** The bytes the pass takes between two checks of the slice: about a quarter of a millisecond. */
const passPieceBytes = 256 * 1024;

/**
 * Yields the chunks after the header, enforcing stream shape and size limits, each through
 * the pass in slices of the tenant's turns (CpuTurns). A chunk is the consumer's only until it
 * asks for the next one (every consumer copies what it keeps: the backends' puts, the head
 * kept for an inline record); then it goes back through `release`.
 */
async function* chunkStream(
  reader: IdleStreamReader<OffloadRequest>,
  limits: ServerLimits,
  header: OffloadHeader,
  pass: Pass<DigestFacts>,
  runRoom: { runId: string; held: number; limit: number } | undefined,
  release: ((bytes: Uint8Array) => void) | undefined,
  turns: { slice: CpuSlice; signal: AbortSignal },
): AsyncGenerator<Uint8Array> {
  for (;;) {
    const next = await reader.next();
    if (next.done === true) return;
    const msg = next.value.msg;
    if (msg.case === "header") {
      throw new ConnectError("an Offload stream carries exactly one header", Code.InvalidArgument);
    }
    if (msg.case !== "chunk") {
      throw new ConnectError(
        "an Offload message must be a header or a chunk",
        Code.InvalidArgument,
      );
    }
    const chunk = msg.value;
    if (chunk.byteLength > limits.maxChunkBytes) {
      throw new ConnectError(
        `chunk of ${chunk.byteLength} bytes exceeds max_chunk_bytes ${limits.maxChunkBytes}`,
        Code.ResourceExhausted,
      );
    }
    if (pass.size() + chunk.byteLength > limits.maxBlobBytes) {
      throw new ConnectError(
        `payload exceeds max_blob_bytes ${limits.maxBlobBytes}`,
        Code.ResourceExhausted,
      );
    }
    if (runRoom !== undefined && runRoom.held + pass.size() + chunk.byteLength > runRoom.limit) {
      throw runBytesExceeded(
        runRoom.runId,
        runRoom.held,
        pass.size() + chunk.byteLength,
        runRoom.limit,
      );
    }
    if (
      header.expectedSize !== undefined &&
      pass.size() + chunk.byteLength > Number(header.expectedSize)
    ) {
      throw new ConnectError(
        `payload is larger than header.expected_size ${header.expectedSize}`,
        Code.InvalidArgument,
      );
    }
    if (chunk.byteLength === 0) continue;
    // In pieces, pausing when the slice is over: the pass over a 4 MiB chunk alone holds the
    // event loop for milliseconds, and every other call waits that long.
    await inPieces(turns.slice, chunk, passPieceBytes, turns.signal, (piece) => pass.push(piece));
    yield chunk;
    release?.(chunk);
  }
}

async function* concatStreams(
  head: Uint8Array[],
  rest: AsyncIterator<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  yield* head;
  for (;;) {
    const next = await rest.next();
    if (next.done === true) return;
    yield next.value;
  }
}

type Placement =
  | { stored: "inline"; inline: Base64 }
  | { stored: "preview_only" }
  | { stored: "blob"; blob: NonNullable<StoredRecord["blob"]> };

async function commit(
  deps: OffloadDeps,
  tenant: string,
  header: OffloadHeader,
  handle: string,
  facts: PassFacts,
  placement: Placement,
  signal: AbortSignal,
  beforeCommit?: WholeOptions["beforeCommit"],
): Promise<OffloadResponse> {
  checkDeclared(header, facts);
  const key = header.key;
  if (key === undefined) throw new ConnectError("header.key: required", Code.InvalidArgument);
  const nowMs = deps.now();
  const ttlMs =
    header.ttl === undefined
      ? undefined
      : Number(header.ttl.seconds) * 1000 + Math.floor(header.ttl.nanos / 1e6);
  const attempt = attemptOf(key.attempt);
  const record: NewRecord = {
    v: 1,
    handle,
    tenant,
    runId: key.runId,
    callId: key.callId,
    ...(header.slot === undefined ? {} : { slot: header.slot }),
    ...(attempt === 1 ? {} : { attempt }),
    name: header.name,
    contentType: header.contentType,
    sizeBytes: facts.size,
    observedBytes: Math.max(
      header.observedBytes === undefined ? facts.size : Number(header.observedBytes),
      facts.size,
    ),
    truncated: header.truncated,
    stored: placement.stored,
    sha256: facts.sha256,
    binary: facts.binary,
    lineCount: facts.lineCount,
    preview: {
      head: facts.preview.head,
      tail: facts.preview.tail,
      shape: facts.preview.shape,
      omittedBytes: Number(facts.preview.omittedBytes),
      text: facts.preview.text,
    },
    createdMs: nowMs,
    ...(ttlMs === undefined ? {} : { expiresMs: nowMs + ttlMs }),
    ...(placement.stored === "blob" ? { blob: placement.blob } : {}),
    json:
      facts.jsonIndex === undefined
        ? { kind: "none", viewLines: 0, stride: 0, checkpoints: 0, reason: facts.notJsonReason }
        : {
            kind: facts.jsonIndex.kind,
            viewLines: facts.jsonIndex.viewLines,
            stride: facts.jsonIndex.stride,
            checkpoints: facts.jsonIndex.count,
          },
    ...(placement.stored === "inline" ? { inline: placement.inline } : {}),
  };
  // Read again at the commit: an upload that outlasted its run's TTL would be acknowledged and
  // refused to every read at once (it was checked only when the stream began).
  const runExpiresAtCommit = await deps.runs.expiresMs(tenant, key.runId, signal);
  if (runExpiresAtCommit !== undefined && runExpiresAtCommit <= deps.now()) {
    throw new ConnectError(
      `run "${truncateForMessage(key.runId)}" expired while "${truncateForMessage(handle)}" was being offloaded; nothing was stored: use another run id`,
      Code.FailedPrecondition,
    );
  }
  // One answer, measured by beforeCommit and then returned: the same object, not a second build.
  let answer: OffloadResponse | undefined;
  const created = () => {
    answer ??= create(OffloadResponseSchema, {
      attachment: toAttachment(record, runExpiresAtCommit),
      created: true,
    });
    return answer;
  };
  if (beforeCommit !== undefined) await beforeCommit(created());
  let committed = await deps.registry.commit(record, key.runId, signal);
  if (!committed.created && isExpired(committed.record, deps.now())) {
    // An expired record no longer holds its handle: it goes, and this commit takes its place;
    // unless another offload has already put its own there, acknowledged.
    await deps.registry.removeCommit(committed.record, key.runId, signal);
    committed = await deps.registry.commit(record, key.runId, signal);
  }
  if (committed.created) {
    await checkCommitStands(deps, committed.record, key.runId, signal);
    return created();
  }
  const run = { runId: key.runId, expiresMs: runExpiresAtCommit };
  return replayStanding(deps, committed.record, header, facts, run, signal);
}

/**
 * whatWithdraws says why a committed record of runId must not be acknowledged, or undefined
 * when nothing does (always for a record without a blob): its blob is gone (a DeleteRun of the
 * run deleted it, and goes on to find the record once its blobs are gone), or the run was
 * marked deleted while forks keep its bytes (the record would stay in a deleted run, and go
 * unreadable once the last fork takes those bytes with it). Both are for good once seen: a blob
 * is never written again under its key, and the mark goes only after the run's blobs.
 */
async function whatWithdraws(
  deps: OffloadDeps,
  record: StoredRecord,
  runId: string,
  signal: AbortSignal,
): Promise<ConnectError | undefined> {
  if (record.blob === undefined) return undefined;
  const [blob, deleted] = await Promise.all([
    deps.backend.head(record.blob.key, { signal }),
    deps.backend.head(runDeletedKey(record.tenant, runId), { signal }),
  ]);
  if (blob !== undefined && deleted === undefined) return undefined;
  return new ConnectError(
    `run "${truncateForMessage(runId)}" was deleted while "${truncateForMessage(record.handle)}" was being offloaded; nothing of it was kept: send it again`,
    Code.Aborted,
  );
}

/**
 * checkCommitStands makes sure a record just committed does not outlive its bytes or its run
 * (whatWithdraws): such a record is removed, if it is still there, and the offload fails
 * ABORTED. A DeleteRun that gets further after this check is the DeleteRun's to finish: it
 * lists the run's records again after deleting its blobs or marking it deleted (Runs.delete).
 */
async function checkCommitStands(
  deps: OffloadDeps,
  committed: StoredRecord,
  runId: string,
  signal: AbortSignal,
): Promise<void> {
  const withdrawn = await whatWithdraws(deps, committed, runId, signal);
  if (withdrawn === undefined) return;
  await deps.registry.removeCommit(committed, runId, signal);
  throw withdrawn;
}

/**
 * replayStanding is replay for a record another offload committed, which that offload may be
 * about to withdraw (checkCommitStands): a replay of one whose bytes or run went is ABORTED,
 * never acknowledged.
 */
async function replayStanding(
  deps: OffloadDeps,
  existing: StoredRecord,
  header: OffloadHeader,
  facts: DigestFacts,
  run: { readonly runId: string; readonly expiresMs: number | undefined },
  signal: AbortSignal,
): Promise<OffloadResponse> {
  const answer = replay(existing, header, facts.sha256, facts.size, run.expiresMs);
  const withdrawn = await whatWithdraws(deps, existing, run.runId, signal);
  if (withdrawn !== undefined) throw withdrawn;
  return answer;
}

/**
 * replay answers an offload whose handle is already committed: with that record when it is
 * this key's (call, slot and attempt) and holds the same bytes, ALREADY_EXISTS otherwise. A record of another key can
 * hold the handle only if it was committed before handles escaped `_` and `%` in file slots
 * (`out_a_file:x_stdout` was then both call `a` + `file:x_stdout` and call `a_file:x` +
 * `stdout`); it is never handed to this key.
 */
function replay(
  existing: StoredRecord,
  header: OffloadHeader,
  sha256: string,
  size: number,
  runExpiresMs: number | undefined,
): OffloadResponse {
  if (
    existing.callId !== header.key?.callId ||
    existing.slot !== header.slot ||
    (existing.attempt ?? 1) !== attemptOf(header.key.attempt)
  ) {
    throw new ConnectError(
      `handle "${existing.handle}" is held by an output committed under another key, before file slots escaped "_"; use another call_id`,
      Code.AlreadyExists,
    );
  }
  if (existing.sha256 !== sha256 || existing.sizeBytes !== size) {
    throw new ConnectError(
      `handle "${existing.handle}" is already committed with different bytes; outputs are never overwritten`,
      Code.AlreadyExists,
    );
  }
  // With the run's expiry, as the first answer and StatToolOutput give it: unset means never.
  return create(OffloadResponseSchema, {
    attachment: toAttachment(existing, runExpiresMs),
    created: false,
  });
}

function checkDeclared(header: OffloadHeader, facts: DigestFacts): void {
  if (header.expectedSize !== undefined && BigInt(facts.size) !== header.expectedSize) {
    throw new ConnectError(
      `payload has ${facts.size} bytes but header.expected_size is ${header.expectedSize}`,
      Code.InvalidArgument,
    );
  }
  if (header.expectedSha256 !== undefined && header.expectedSha256 !== facts.sha256) {
    // The bytes are not what the client declared: lost on its side or on the way, not here.
    throw markFault(
      new ConnectError(
        `payload sha256 ${facts.sha256} does not match header.expected_sha256 ${header.expectedSha256}`,
        Code.DataLoss,
      ),
      "client",
    );
  }
}

async function removeQuietly(
  backend: Backend,
  key: string,
  indexKey: string | undefined,
  jsonKey?: string,
) {
  // Cleanup must not mask the original error; a leftover blob has no record and is swept.
  await backend.delete(key).catch(() => {});
  if (indexKey !== undefined) await backend.delete(indexKey).catch(() => {});
  if (jsonKey !== undefined) await backend.delete(jsonKey).catch(() => {});
}
