import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { CallOptions, Client, Interceptor, Transport } from "@connectrpc/connect";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  type DeleteRunResponse,
  type ForkRunResponse,
  type GetServerInfoResponse,
  type MergeRunResponse,
  type OffloadHeader,
  OffloadHeaderSchema,
  OffloadRequestSchema,
  type ReadToolOutputRequest,
  type ReadToolOutputRequestSchema,
  type ReadToolOutputResponse,
  ReadToolOutputResponseSchema,
  type RunInfo,
  type SetRunTtlResponse,
  SpillwayService,
  type WindowHeader,
  type WindowTrailer,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { BlobKey, ResultAttachment } from "@spillway/proto/spillway/v1/types_pb.js";
import { dataFrame, dataFramePath } from "@spillway/wire";
import { checkBaseUrl } from "./base-url.js";
import { single } from "./exchange-transport.js";
import { createGrpcTransport } from "./grpc-transport.js";
import {
  createGrpcWebTransport,
  createKeepAliveAgent,
  isHttp1Refusal,
} from "./grpc-web-transport.js";
import { jsonText, noTextKind } from "./json-text.js";
import { createOffloadBatcher } from "./offload-batcher.js";
import {
  isTransientError,
  type RetryBudget,
  type RetryOptions,
  retryBudget,
  retryUnavailable,
} from "./retry.js";
import { type ClientTlsOptions, createWideWindowSessionManager } from "./session-manager.js";
import { createSessionPool } from "./session-pool.js";
import { createSha256Hasher, type Sha256Hash } from "./sha256-hasher.js";
import { createTracePropagation } from "./trace-propagation.js";

/** SpillwayClientOptions configure createSpillwayClient. */
export interface SpillwayClientOptions {
  /**
   * Server URL, `http://host:port` or `https://host:port` (e.g. `http://127.0.0.1:50051`);
   * createSpillwayClient throws INVALID_ARGUMENT for any other form (ignored with `transport`).
   */
  readonly baseUrl: string;
  /** Bearer token; omit for a dev-mode server. */
  readonly token?: string;
  /** For an `https://` baseUrl: a CA to trust instead of the system's, and an mTLS identity. */
  readonly tls?: ClientTlsOptions;
  /** A ready transport (for gRPC-Web or custom settings); baseUrl, token, tls and interceptors are then ignored. */
  readonly transport?: Transport;
  /** Extra interceptors for the built transport, run after the one that adds the token. */
  readonly interceptors?: readonly Interceptor[];
  /** How offload retries UNAVAILABLE; default 3 attempts, 100 ms base backoff, 2 s cap. */
  readonly retry?: RetryOptions;
  /**
   * `"http1"`: readBytes streams payloads as binary gRPC-Web over HTTP/1.1 keep-alive
   * connections, which Node reads with far less CPU per byte than HTTP/2 (for copying whole
   * outputs out, as `spillway cat` does). Every other call, and readBytes from a server or
   * proxy that does not answer gRPC-Web over HTTP/1.1 (after which the client stays on HTTP/2),
   * runs over HTTP/2. Default `"http2"`; ignored with `transport`.
   */
  readonly bulkReads?: "http1" | "http2";
  /**
   * Most HTTP/2 connections to hold to the server, 1 to 64; each call starts on the one with
   * the fewest calls open, and a connection opens with the first call it gets, so a client
   * making one call at a time holds one. A server with several workers (`spillway serve`, a
   * worker a core) gives each connection to one worker, so concurrent calls reach several.
   * Default 4; ignored with `transport`.
   */
  readonly connections?: number;
}

/** SpillwayCallOptions bound one SDK call: a deadline for the whole call and a cancel signal. */
export interface SpillwayCallOptions {
  /** Deadline of the whole call (retries included); the server sees it as grpc-timeout. */
  readonly timeoutMs?: number;
  /** Aborting it cancels the call (CANCELED); nothing partial becomes visible. */
  readonly signal?: AbortSignal;
}

/**
 * OffloadData is anything offload accepts: bytes, text (as UTF-8), a JSON value (as the compact
 * text JSON.stringify writes), or a byte stream.
 */
export type OffloadData = Uint8Array | string | AsyncIterable<Uint8Array> | { json: unknown };

/** OffloadOptions are the header fields besides the key. */
export type OffloadOptions = Omit<
  Exclude<MessageInitShape<typeof OffloadHeaderSchema>, OffloadHeader>,
  "key" | "$typeName"
>;

/**
 * OffloadKey is the address of an offload: tenant, run, call and, for a retried call, the
 * attempt (unset or 1 for the first).
 */
export type OffloadKey = Omit<BlobKey, "$typeName" | "attempt"> & { readonly attempt?: number };

/** OffloadResult is a committed record and whether this call created it. */
export interface OffloadResult {
  /** The committed record. */
  readonly attachment: ResultAttachment;
  /** False when an identical earlier offload (or an earlier attempt of this one) committed it. */
  readonly created: boolean;
}

/** ReadToolOutputInit is a ReadToolOutput request as plain fields. */
export type ReadToolOutputInit = Exclude<
  MessageInitShape<typeof ReadToolOutputRequestSchema>,
  ReadToolOutputRequest
> & { runId: string; handle: string };

/** Window is a whole ReadToolOutput answer, collected. */
export interface Window {
  readonly header: WindowHeader | undefined;
  readonly frames: ReadToolOutputResponse[];
  readonly trailer: WindowTrailer | undefined;
  /** The server-rendered text to show the model. */
  readonly rendered: string;
}

/** ReadBytesOptions bound one readBytes call and ask for the payload's bytes to be checked. */
export interface ReadBytesOptions extends SpillwayCallOptions {
  /**
   * Check the bytes read against the record's sha256 and size (from a stat before the read):
   * the whole payload only. Large payloads are hashed on a worker thread, so the check costs
   * the caller's event loop a copy, not the hashing.
   */
  readonly verify?: boolean;
}

/** ByteRange selects bytes of a payload: from `offset` (default 0), `length` of them. */
export interface ByteRange {
  /** 0-based first byte; default 0. */
  readonly offset?: number;
  /** Bytes to read; unset reads to the end of the payload. */
  readonly length?: number;
}

/** ListPage is one page of a run's records. */
export interface ListPage {
  /** Records, by escaped handle, each output's attempts together in attempt order (ListToolOutputsResponse). */
  readonly attachments: ResultAttachment[];
  /** Token for the next page; empty on the last page. */
  readonly nextPageToken: string;
}

/** RunsPage is one page of listRuns. */
export interface RunsPage {
  /**
   * The caller's runs, each with its live outputs' count and bytes, times, expiry and fork
   * parent, in the server's stored order (not alphabetical), which the next page resumes.
   */
  readonly runs: RunInfo[];
  /** Token for the next page; empty on the last page. */
  readonly nextPageToken: string;
}

/** ListOptions select one page of list or listRuns. */
export interface ListOptions extends SpillwayCallOptions {
  /** Records per page; the server defaults to 100 and allows at most 1000. */
  readonly pageSize?: number;
  /** From a previous page's nextPageToken. */
  readonly pageToken?: string;
}

/** ForkRunOptions configure forkRun. */
export interface ForkRunOptions extends SpillwayCallOptions {
  /** Time to live of the child run in seconds; unset keeps it until deleted. */
  readonly ttlSeconds?: number;
}

/** SpillwayClient is the thin SDK over the generated client. */
export interface SpillwayClient {
  /** The generated Connect client, for calls the SDK does not wrap. */
  readonly raw: Client<typeof SpillwayService>;
  /**
   * offload streams data to key in 1 MiB chunks and returns the committed record; a payload of
   * at most 64 KiB given whole (bytes, text, a JSON value) goes instead as an item of an
   * OffloadBatch shared with the offloads started in the same turn of the event loop, with the
   * same outcome, deadline and cancellation as a call of its own. It retries UNAVAILABLE
   * (offload is idempotent per key and bytes) with backoff, unless data is an AsyncIterable that
   * the failed attempt already started to read: a stream cannot be replayed, so that error is
   * rethrown. Bytes, strings and JSON values are always replayable, and a streamed one
   * announces its size (`expected_size`), so a payload over the server's max_blob_bytes is
   * RESOURCE_EXHAUSTED before its bytes are sent. A JSON value with no JSON text (undefined, a
   * function, a symbol; `{ json: null }` stores `null`) or that JSON cannot write (a BigInt, a
   * cycle), and data of none of OffloadData's forms, are INVALID_ARGUMENT before any call.
   */
  offload(
    key: OffloadKey,
    data: OffloadData,
    options?: OffloadOptions,
    call?: SpillwayCallOptions,
  ): Promise<ResultAttachment>;
  /** offloadResult is offload that also reports whether this call created the record. */
  offloadResult(
    key: OffloadKey,
    data: OffloadData,
    options?: OffloadOptions,
    call?: SpillwayCallOptions,
  ): Promise<OffloadResult>;
  /** readToolOutput reads one window and collects it; `rendered` is the server's model text. */
  readToolOutput(
    request: MessageInitShape<typeof ReadToolOutputRequestSchema> & {
      runId: string;
      handle: string;
    },
    call?: SpillwayCallOptions,
  ): Promise<Window>;
  /**
   * readBytes streams a payload's bytes in `range` (all of it by default) as they come off the
   * wire, each chunk a view of what arrived, not a copy: bytes-mode windows without rendered
   * text, one after another when the server's max_bytes_window ends one early. A transient
   * failure (see isTransientError) resumes at the first byte not yet yielded, under the
   * client's retry policy (attempts count again once bytes arrive); no byte is yielded twice,
   * and `timeoutMs` bounds the whole read. With `verify` (whole payload only; a range is
   * INVALID_ARGUMENT) the bytes are checked against the record's sha256 and size as they pass:
   * a mismatch fails the read with DATA_LOSS after its last byte, in place of a clean end.
   */
  readBytes(
    runId: string,
    handle: string,
    range?: ByteRange,
    call?: ReadBytesOptions,
  ): AsyncGenerator<Uint8Array, void, undefined>;
  /**
   * stat returns the record behind handle, as run runId resolves it; a transient failure is
   * retried under the client's retry policy within `timeoutMs`.
   */
  stat(runId: string, handle: string, call?: SpillwayCallOptions): Promise<ResultAttachment>;
  /** list returns one page of run runId's records, by escaped handle, each output's attempts together in attempt order. */
  list(runId: string, options?: ListOptions): Promise<ListPage>;
  /** listAll yields every record of run runId, fetching pages as it goes. */
  listAll(
    runId: string,
    options?: Omit<ListOptions, "pageToken">,
  ): AsyncGenerator<ResultAttachment, void, undefined>;
  /**
   * listRuns returns one page of the calling tenant's runs (expired and deleted runs are not
   * listed). A page may hold fewer than pageSize runs and still have a next page: the server
   * bounds the records it reads per call. A token from another tenant, another RPC or edited
   * is INVALID_ARGUMENT.
   */
  listRuns(options?: ListOptions): Promise<RunsPage>;
  /** listAllRuns yields every run of the calling tenant, fetching pages as it goes. */
  listAllRuns(options?: Omit<ListOptions, "pageToken">): AsyncGenerator<RunInfo, void, undefined>;
  /** deleteRun removes run runId's registry and the bytes no fork still uses. */
  deleteRun(runId: string, call?: SpillwayCallOptions): Promise<DeleteRunResponse>;
  /** forkRun creates child, which sees parent's handles without copied bytes. */
  forkRun(parent: string, child: string, options?: ForkRunOptions): Promise<ForkRunResponse>;
  /**
   * mergeRun brings the outputs forked run child created into parent, its fork parent, under
   * the same handles, all or nothing: ALREADY_EXISTS (naming the handle) when parent holds one
   * of them with other bytes, FAILED_PRECONDITION when parent is not child's fork parent,
   * NOT_FOUND for a missing child. Repeating it changes nothing (all unchanged).
   */
  mergeRun(child: string, parent: string, call?: SpillwayCallOptions): Promise<MergeRunResponse>;
  /** setRunTtl makes run runId expire ttlSeconds from now. */
  setRunTtl(
    runId: string,
    ttlSeconds: number,
    call?: SpillwayCallOptions,
  ): Promise<SetRunTtlResponse>;
  /** serverInfo returns the server's version, backend, limits, window caps and features. */
  serverInfo(call?: SpillwayCallOptions): Promise<GetServerInfoResponse>;
  /**
   * close releases what the client holds: its HTTP/2 connections, the HTTP/1.1 ones of
   * `bulkReads: "http1"`, and the worker thread of verified reads. Calls in flight end
   * CANCELED, none retried (one waiting out a retry's backoff when it ends), and every call
   * made afterwards, `raw`'s included, is refused with CANCELED ("the Spillway client was
   * closed") without opening a connection. A `transport` given in the options is the caller's
   * to close: the client only stops using it. Calling close again returns the first call's
   * promise.
   */
  close(): Promise<void>;
  /** The same as close, for `await using client = createSpillwayClient(…)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

const CHUNK_BYTES = 1024 * 1024;

/**
 * Payloads up to this size share OffloadBatch calls with the offloads started beside them;
 * larger ones stream on their own Offload call, where one call's cost is small against the
 * bytes.
 */
const BATCHED_BYTES = 64 * 1024;

/** createSpillwayClient connects to a Spillway server over gRPC (HTTP/2). */
export function createSpillwayClient(opts: SpillwayClientOptions): SpillwayClient {
  if (opts.transport === undefined) checkBaseUrl(opts.baseUrl);
  const auth: Interceptor = (next) => (req) => {
    if (opts.token !== undefined) req.header.set("authorization", `Bearer ${opts.token}`);
    return next(req);
  };
  const traced = createTracePropagation();
  const transportOptions = {
    baseUrl: opts.baseUrl,
    interceptors: [auth, ...(traced === undefined ? [] : [traced]), ...(opts.interceptors ?? [])],
    readMaxBytes: 64 * 1024 * 1024,
    // A bytes-mode read hands out each data frame's bytes as they arrive, uncopied.
    bytesFields: [
      { output: ReadToolOutputResponseSchema, path: dataFramePath, message: dataFrame },
    ],
  };
  /** The HTTP/2 connections the client owns (none with a given transport), for close. */
  const connections =
    opts.transport === undefined
      ? Array.from({ length: connectionCount(opts.connections) }, () =>
          createWideWindowSessionManager(opts.baseUrl, opts.tls),
        )
      : [];
  /** Set by close: every call from then on is refused. */
  let closed: ConnectError | undefined;
  const isClosed = () => closed;
  const transport = refusedOnceClosed(
    opts.transport ??
      createGrpcTransport({
        ...transportOptions,
        sessionManager: createSessionPool(connections),
      }),
    isClosed,
  );
  const raw = createClient(SpillwayService, transport);
  const bulkAgent =
    opts.bulkReads === "http1" && opts.transport === undefined
      ? createKeepAliveAgent(opts.baseUrl, opts.tls)
      : undefined;
  /** The client readBytes uses while the server answers gRPC-Web over HTTP/1.1. */
  let bulk =
    bulkAgent === undefined
      ? undefined
      : createClient(
          SpillwayService,
          refusedOnceClosed(
            createGrpcWebTransport({ ...transportOptions, agent: bulkAgent }),
            isClosed,
          ),
        );
  /** The client's retry policy for one call: transient failures, within its signal and time. */
  const retryPolicy = (call: SpillwayCallOptions) => ({
    retry: opts.retry,
    signal: call.signal,
    timeoutMs: call.timeoutMs,
    retryable: isTransientError,
  });

  // Offload is idempotent, so a proxy's reset of a stream whose replica died is retried too.
  const offloadStream = (
    header: MessageInitShape<typeof OffloadHeaderSchema>,
    data: OffloadData,
    call: SpillwayCallOptions,
  ) => {
    const source = { started: false };
    return retryUnavailable(
      (timeoutMs) => raw.offload(requests(header, data, source), callOptions(call, timeoutMs)),
      { ...retryPolicy(call), replayable: () => isReplayable(data) || !source.started },
    );
  };
  const batcher = createOffloadBatcher({
    sendBatch: (items, timeoutMs, signal) =>
      retryUnavailable((left) => raw.offloadBatch({ items }, { timeoutMs: left, signal }), {
        retry: opts.retry,
        signal,
        timeoutMs,
        retryable: isTransientError,
      }),
    sendOne: (header, data, timeoutMs, signal) =>
      offloadStream(header, data, {
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
        ...(signal === undefined ? {} : { signal }),
      }),
  });

  async function offloadResult(
    key: OffloadKey,
    data: OffloadData,
    options: OffloadOptions = {},
    call: SpillwayCallOptions = {},
  ): Promise<OffloadResult> {
    checkOffloadData(data);
    const header = { ...options, key };
    const whole = isReplayable(data) ? bytesOf(data) : undefined;
    const res =
      whole !== undefined && whole.byteLength <= BATCHED_BYTES
        ? await batcher.offload(create(OffloadHeaderSchema, header), whole, call)
        : await offloadStream(
            // A streamed payload of known length announces it, so the server refuses one over
            // its limits before the bytes are sent.
            whole === undefined || options.expectedSize !== undefined
              ? header
              : { ...header, expectedSize: BigInt(whole.byteLength) },
            whole ?? data,
            call,
          );
    if (res.attachment === undefined) {
      throw new ConnectError("server returned no attachment", Code.Internal);
    }
    return { attachment: res.attachment, created: res.created };
  }

  const hasher = createSha256Hasher();

  async function list(runId: string, options: ListOptions = {}): Promise<ListPage> {
    const res = await raw.listToolOutputs(
      { runId, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
      callOptions(options),
    );
    return { attachments: res.attachments, nextPageToken: res.nextPageToken };
  }

  async function listRuns(options: ListOptions = {}): Promise<RunsPage> {
    const res = await raw.listRuns(
      { pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
      callOptions(options),
    );
    return { runs: res.runs, nextPageToken: res.nextPageToken };
  }

  async function stat(
    runId: string,
    handle: string,
    call: SpillwayCallOptions = {},
  ): Promise<ResultAttachment> {
    // A stat is idempotent, so a lost replica is retried like a window read.
    const res = await retryUnavailable(
      (timeoutMs) => raw.statToolOutput({ runId, handle }, callOptions(call, timeoutMs)),
      retryPolicy(call),
    );
    if (res.attachment === undefined) {
      throw new ConnectError("server returned no attachment", Code.Internal);
    }
    return res.attachment;
  }

  /**
   * verification looks up what a verified readBytes must find (the record's size and sha256)
   * and starts the hash that checks it; verify covers whole payloads only.
   */
  async function verification(
    runId: string,
    handle: string,
    range: ByteRange,
    call: SpillwayCallOptions,
    budget: RetryBudget,
  ): Promise<{ size: number; sha256: string; hash: Sha256Hash }> {
    if ((range.offset ?? 0) !== 0 || range.length !== undefined) {
      throw new ConnectError(
        "readBytes: verify checks a whole payload; drop the range's offset and length",
        Code.InvalidArgument,
      );
    }
    const left = budget.left();
    const attachment = await stat(runId, handle, {
      ...(call.signal === undefined ? {} : { signal: call.signal }),
      ...(left === undefined ? {} : { timeoutMs: left }),
    });
    const size = Number(attachment.sizeBytes);
    return { size, sha256: attachment.sha256, hash: hasher.hash(size) };
  }

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      closed = new ConnectError("the Spillway client was closed", Code.Canceled);
      // Node ends each stream in flight on these connections with this reason.
      for (const connection of connections) connection.abort(closed);
      bulkAgent?.destroy();
      await hasher.close();
    })();
    return closing;
  };

  return {
    raw,
    close,
    [Symbol.asyncDispose]: close,
    async offload(key, data, options, call) {
      return (await offloadResult(key, data, options, call)).attachment;
    },
    offloadResult,
    readToolOutput(request, call = {}) {
      // A window read is idempotent, so a replica lost mid-stream is retried from the start.
      return retryUnavailable(async (timeoutMs) => {
        const frames: ReadToolOutputResponse[] = [];
        let header: WindowHeader | undefined;
        let trailer: WindowTrailer | undefined;
        // Straight from the transport: connect's promise client would pass every frame through
        // its down-levelled generators first, a share of a small window's cost.
        const res = await transport.stream(
          SpillwayService.method.readToolOutput,
          call.signal,
          timeoutMs,
          undefined,
          single(request),
        );
        for await (const frame of res.message) {
          frames.push(frame);
          if (frame.frame.case === "header") header = frame.frame.value;
          if (frame.frame.case === "trailer") trailer = frame.frame.value;
        }
        return { header, frames, trailer, rendered: trailer?.rendered ?? "" };
      }, retryPolicy(call));
    },
    async *readBytes(runId, handle, range = {}, call = {}) {
      for (const [name, value] of [
        ["offset", range.offset],
        ["length", range.length],
      ] as const) {
        if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
          throw new ConnectError(
            `readBytes: ${name} must be a non-negative integer, got ${value}`,
            Code.InvalidArgument,
          );
        }
      }
      const budget = retryBudget(retryPolicy(call));
      const check =
        call.verify === true ? await verification(runId, handle, range, call, budget) : undefined;
      let position = range.offset ?? 0;
      const end = range.length === undefined ? undefined : position + range.length;
      let failures = 0;
      try {
        while (end === undefined || position < end) {
          const bytes = {
            offset: BigInt(position),
            ...(end === undefined ? {} : { limit: BigInt(end - position) }),
          };
          const request = {
            runId,
            handle,
            window: { case: "bytes", value: bytes },
            omitRendered: true,
          } as const;
          const from = position;
          let trailer: WindowTrailer | undefined;
          const reader = bulk ?? raw;
          try {
            for await (const frame of reader.readToolOutput(
              request,
              callOptions(call, budget.left()),
            )) {
              if (frame.frame.case === "trailer") trailer = frame.frame.value;
              if (frame.frame.case !== "content" || frame.frame.value.body.case !== "data")
                continue;
              const data = frame.frame.value.body.value;
              position += data.byteLength;
              // Hashed before the caller sees (and may reuse) the bytes; waits only for room.
              const room = check?.hash.update(data);
              if (room !== undefined) await room;
              yield data;
            }
          } catch (err) {
            // A read close cut short ends now, not after a retry's backoff.
            if (closed !== undefined) throw closed;
            if (reader === bulk && isHttp1Refusal(err)) {
              bulk = undefined;
              continue;
            }
            failures = position > from ? 1 : failures + 1;
            await budget.failed(err, failures);
            continue;
          }
          if (trailer === undefined) {
            throw new ConnectError(
              "the server ended a bytes window without its trailer",
              Code.Internal,
            );
          }
          if (trailer.eof || trailer.nextOffset === undefined) break;
          if (position === from) {
            throw new ConnectError(
              `the server returned an empty bytes window at ${position}, before the payload's end`,
              Code.Internal,
            );
          }
          if (trailer.nextOffset !== BigInt(position)) {
            throw new ConnectError(
              `the server's bytes window ended at ${position} but says the next starts at ${trailer.nextOffset}`,
              Code.Internal,
            );
          }
          failures = 0;
        }
        if (check === undefined) return;
        const sha256 = await check.hash.digest();
        if (position !== check.size || sha256 !== check.sha256) {
          throw new ConnectError(
            `readBytes: ${handle} read back as ${position} bytes with sha256 ${sha256}, but its record says ${check.size} bytes with sha256 ${check.sha256}`,
            Code.DataLoss,
          );
        }
      } finally {
        check?.hash.dispose();
      }
    },
    stat,
    list,
    async *listAll(runId, options = {}) {
      let pageToken = "";
      do {
        const page = await list(runId, { ...options, pageToken });
        yield* page.attachments;
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
    },
    listRuns,
    async *listAllRuns(options = {}) {
      let pageToken = "";
      do {
        const page = await listRuns({ ...options, pageToken });
        yield* page.runs;
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
    },
    deleteRun(runId, call = {}) {
      return raw.deleteRun({ runId }, callOptions(call));
    },
    forkRun(parent, child, options = {}) {
      return raw.forkRun(
        {
          parentRunId: parent,
          childRunId: child,
          ttl: options.ttlSeconds === undefined ? undefined : duration(options.ttlSeconds),
        },
        callOptions(options),
      );
    },
    mergeRun(child, parent, call = {}) {
      return raw.mergeRun({ childRunId: child, parentRunId: parent }, callOptions(call));
    },
    setRunTtl(runId, ttlSeconds, call = {}) {
      return raw.setRunTtl({ runId, ttl: duration(ttlSeconds) }, callOptions(call));
    },
    serverInfo(call = {}) {
      return raw.getServerInfo({}, callOptions(call));
    },
  };
}

/**
 * refusedOnceClosed is transport, except that once closed() returns an error every call
 * rejects with it without reaching transport (so no connection is opened again).
 */
function refusedOnceClosed(
  transport: Transport,
  closed: () => ConnectError | undefined,
): Transport {
  /** A rejection that is no unhandled one if its caller reads it late (a streaming call). */
  const refused = (err: ConnectError) => {
    const p = Promise.reject(err);
    p.catch(() => undefined);
    return p;
  };
  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const err = closed();
      if (err !== undefined) return refused(err);
      return transport.unary(method, signal, timeoutMs, header, input, contextValues);
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      const err = closed();
      if (err !== undefined) return refused(err);
      return transport.stream(method, signal, timeoutMs, header, input, contextValues);
    },
  };
}

function callOptions(call: SpillwayCallOptions, timeoutMs = call.timeoutMs): CallOptions {
  return { timeoutMs, signal: call.signal };
}

function duration(seconds: number) {
  const whole = Math.floor(seconds);
  return { seconds: BigInt(whole), nanos: Math.round((seconds - whole) * 1e9) };
}

/** Whether data is whole in memory (bytes, text, a JSON value), so any attempt can resend it. */
function isReplayable(data: OffloadData): data is Exclude<OffloadData, AsyncIterable<Uint8Array>> {
  return typeof data === "string" || data instanceof Uint8Array || "json" in data;
}

/**
 * The bytes of data that is whole in memory: INVALID_ARGUMENT for a JSON value with no JSON
 * text (undefined, a function, a symbol), which would otherwise be sent as an empty payload or
 * fail in Buffer.from, and for one JSON cannot write (a BigInt, a cycle).
 */
function bytesOf(data: Exclude<OffloadData, AsyncIterable<Uint8Array>>): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (typeof data === "string") return Buffer.from(data, "utf8");
  const text = jsonText(data.json, "offload");
  if (text === undefined) {
    throw new ConnectError(
      `offload: the JSON value is ${noTextKind(data.json)}, which has no JSON text; offload { json: null } for a result that is nothing`,
      Code.InvalidArgument,
    );
  }
  return Buffer.from(text, "utf8");
}

/** Refuses, by name, data that is none of OffloadData's forms (only untyped code can pass it). */
function checkOffloadData(data: unknown): asserts data is OffloadData {
  if (
    typeof data === "string" ||
    data instanceof Uint8Array ||
    (typeof data === "object" && data !== null && ("json" in data || Symbol.asyncIterator in data))
  ) {
    return;
  }
  const got = data === null ? "null" : typeof data === "object" ? "an object" : typeof data;
  throw new ConnectError(
    `offload: data must be bytes, a string, { json: value } or an AsyncIterable<Uint8Array>, got ${got}`,
    Code.InvalidArgument,
  );
}

async function* requests(
  header: MessageInitShape<typeof OffloadHeaderSchema>,
  data: OffloadData,
  source: { started: boolean },
) {
  yield create(OffloadRequestSchema, {
    msg: { case: "header", value: create(OffloadHeaderSchema, header) },
  });
  for await (const chunk of chunks(data, source)) {
    yield create(OffloadRequestSchema, { msg: { case: "chunk", value: chunk } });
  }
}

async function* chunks(
  data: OffloadData,
  source: { started: boolean },
): AsyncGenerator<Uint8Array> {
  if (isReplayable(data)) {
    const bytes = bytesOf(data);
    for (let i = 0; i < bytes.byteLength; i += CHUNK_BYTES) {
      yield bytes.subarray(i, i + CHUNK_BYTES);
    }
    return;
  }
  // From here on the caller's stream may have lost data to this attempt; it cannot be replayed.
  source.started = true;
  yield* data;
}

/** The connections a client may hold unless told: enough to reach a small host's workers. */
const DEFAULT_CONNECTIONS = 4;

/** The connections option, checked: a whole number from 1 to 64. */
function connectionCount(connections: number | undefined): number {
  const n = connections ?? DEFAULT_CONNECTIONS;
  if (!Number.isInteger(n) || n < 1 || n > 64) {
    throw new ConnectError(
      `connections must be a whole number from 1 to 64, got ${connections}`,
      Code.InvalidArgument,
    );
  }
  return n;
}
