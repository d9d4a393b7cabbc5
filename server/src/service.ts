import { create, toBinary } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  DeleteRunRequestSchema,
  ForkRunRequestSchema,
  GetServerInfoResponseSchema,
  ListRunsRequestSchema,
  ListToolOutputsRequestSchema,
  MergeRunRequestSchema,
  ReadToolOutputRequestSchema,
  SetRunTtlRequestSchema,
  type SpillwayService,
  StatToolOutputRequestSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import {
  type ResultAttachment,
  ResultAttachmentSchema,
} from "@spillway/proto/spillway/v1/types_pb.js";
import { tenantLimitsKey, tenantOf } from "./auth.js";
import type { Backend } from "./backends/backend.js";
import type { ConnectionLiveness } from "./connection-liveness.js";
import { type CpuTurns, sharedCpuTurns } from "./cpu-turns.js";
import { requestChunkReleaseKey } from "./grpc-wire.js";
import { limitsForTenant, lowerLimit, type ServerLimits } from "./limits.js";
import { type ListRunsLog, listRuns } from "./list-runs.js";
import { type BatchItemFailure, batchItemFailuresKey } from "./log-interceptor.js";
import { mergeRun } from "./merge-run.js";
import { offload } from "./offload.js";
import { offloadBatch } from "./offload-batch.js";
import { decodePageToken, encodePageToken } from "./page-token.js";
import { type StoredRecord, toAttachment } from "./record.js";
import { createRegistry, type Registry } from "./registry.js";
import { boundFrames } from "./reply-frames.js";
import { fieldBytes, MAX_REPLY_BYTES } from "./reply-size.js";
import { resolveHandle, windowSourceFor } from "./resolve.js";
import { createRuns, type Runs } from "./runs.js";
import { validateRequest } from "./validation.js";
import type { WindowCaps } from "./window/caps.js";
import { readWindow } from "./window/read-window.js";

/** SPILLWAY_VERSION is reported by GetServerInfo. */
export const SPILLWAY_VERSION = "0.1.0";

/** SpillwayCore is the service's state, shared by the handlers and the sweeper. */
export interface SpillwayCore {
  readonly backend: Backend;
  readonly registry: Registry;
  readonly runs: Runs;
  readonly limits: ServerLimits;
  readonly caps: WindowCaps;
  readonly now: () => number;
  /** How long computations (large offloads' passes, scans) share the event loop by tenant. */
  readonly turns: CpuTurns;
}

/**
 * createSpillwayCore wires the registry and run state onto a backend; its turns are the
 * process's (sharedCpuTurns) unless given.
 */
export function createSpillwayCore(opts: {
  backend: Backend;
  limits: ServerLimits;
  caps: WindowCaps;
  now?: () => number;
  turns?: CpuTurns;
}): SpillwayCore {
  const now = opts.now ?? (() => Date.now());
  const registry = createRegistry(opts.backend);
  return {
    backend: opts.backend,
    registry,
    runs: createRuns(opts.backend, registry, now),
    limits: opts.limits,
    caps: opts.caps,
    now,
    turns: opts.turns ?? sharedCpuTurns(),
  };
}

/**
 * Bytes a ListToolOutputs page's records may take: the reply bound less the room of the
 * longest next_page_token a request accepts back (2,048 bytes, the proto's rule).
 */
const listRecordsBudget = MAX_REPLY_BYTES - fieldBytes(2048);

const durationMs = (d: { seconds: bigint; nanos: number }) =>
  Number(d.seconds) * 1000 + Math.floor(d.nanos / 1e6);

/**
 * CallLimits are the bounds the server enforces around every call, outside the handlers
 * (server.ts); GetServerInfo reports them.
 */
export interface CallLimits {
  /** Bytes held for calls in flight before new ones are refused; 0: no limit. */
  readonly maxInflightBytes: number;
  /** Bytes one tenant's calls in flight may hold; 0: no limit (see inflight-bytes-limit.ts). */
  readonly maxInflightBytesPerTenant: number;
  /** Calls one tenant may have in flight at once. */
  readonly maxCallsPerTenant: number;
  /** Longest a call may run; undefined or 0: no server deadline. */
  readonly requestDeadlineMs?: number | undefined;
  /** When idle connections are closed and dead peers detected. */
  readonly connection: ConnectionLiveness;
}

/**
 * createSpillwayService implements spillway.v1.SpillwayService over a core. Every handler
 * takes the tenant from authentication, validates the request against its declared rules,
 * and reaches bytes only through the caller's run registry. `log` gets what a listing skips
 * (an entry it cannot read).
 */
export function createSpillwayService(
  core: SpillwayCore,
  callLimits: CallLimits,
  log?: ListRunsLog,
): ServiceImpl<typeof SpillwayService> {
  const resolve = (ctx: HandlerContext, runId: string, handle: string) =>
    resolveHandle(core.registry, core.runs, tenantOf(ctx), runId, handle, core.now(), ctx.signal);

  return {
    offload(requests, ctx) {
      return offload(
        core,
        tenantOf(ctx),
        requests,
        ctx.signal,
        ctx.values.get(tenantLimitsKey),
        ctx.values.get(requestChunkReleaseKey),
      );
    },

    offloadBatch(req, ctx) {
      const failures: BatchItemFailure[] = [];
      ctx.values.set(batchItemFailuresKey, failures);
      return offloadBatch(
        core,
        tenantOf(ctx),
        req,
        ctx.signal,
        ctx.values.get(tenantLimitsKey),
        (index, error) => failures.push({ index, error }),
      );
    },

    async *readToolOutput(req, ctx) {
      validateRequest(ReadToolOutputRequestSchema, req);
      const { record } = await resolve(ctx, req.runId, req.handle);
      const source = windowSourceFor(core.backend, record, () =>
        resolve(ctx, req.runId, req.handle),
      );
      const slice = core.turns.begin(record.tenant);
      yield* boundFrames(readWindow(source, req, core.caps, ctx.signal, slice));
    },

    async statToolOutput(req, ctx) {
      validateRequest(StatToolOutputRequestSchema, req);
      const { record, runExpiresMs } = await resolve(ctx, req.runId, req.handle);
      return { attachment: toAttachment(record, runExpiresMs) };
    },

    listRuns(req, ctx) {
      validateRequest(ListRunsRequestSchema, req);
      return listRuns(core, tenantOf(ctx), req, ctx.signal, log);
    },

    async listToolOutputs(req, ctx) {
      validateRequest(ListToolOutputsRequestSchema, req);
      const tenant = tenantOf(ctx);
      const after = decodePageToken(tenant, req.runId, req.pageToken);
      const nowMs = core.now();
      const runExpiresMs = await core.runs.expiresMs(tenant, req.runId, ctx.signal);
      if (runExpiresMs !== undefined && runExpiresMs <= nowMs) {
        return { attachments: [], nextPageToken: "" };
      }
      const live = (r: StoredRecord) => r.expiresMs === undefined || r.expiresMs > nowMs;
      // Each record's attachment is measured as it joins the page and kept for the reply.
      const shown = new Map<StoredRecord, ResultAttachment>();
      const page = await core.registry.list(tenant, req.runId, {
        after,
        limit: req.pageSize === 0 ? 100 : req.pageSize,
        signal: ctx.signal,
        // One bad record must not hide the run's other outputs; reading it still fails.
        onUnreadable: (key, reason) =>
          log?.warn({ key, err: reason }, "ListToolOutputs skipped a record it cannot read"),
        budget: {
          bytes: listRecordsBudget,
          sizeOf: (r) => {
            if (!live(r)) return 0;
            const attachment = toAttachment(r, runExpiresMs);
            shown.set(r, attachment);
            return fieldBytes(toBinary(ResultAttachmentSchema, attachment).byteLength);
          },
        },
      });
      return {
        attachments: page.records
          .filter(live)
          .map((r) => shown.get(r) ?? toAttachment(r, runExpiresMs)),
        nextPageToken:
          page.nextAfter === undefined ? "" : encodePageToken(tenant, req.runId, page.nextAfter),
      };
    },

    async deleteRun(req, ctx) {
      validateRequest(DeleteRunRequestSchema, req);
      const deleted = await core.runs.delete(tenantOf(ctx), req.runId, ctx.signal);
      return { deletedAttachments: BigInt(deleted) };
    },

    async forkRun(req, ctx) {
      validateRequest(ForkRunRequestSchema, req);
      const forked = await core.runs.fork(
        tenantOf(ctx),
        req.parentRunId,
        req.childRunId,
        req.ttl === undefined ? undefined : durationMs(req.ttl),
        ctx.signal,
      );
      return { forkedAttachments: BigInt(forked) };
    },

    async mergeRun(req, ctx) {
      validateRequest(MergeRunRequestSchema, req);
      const limits = limitsForTenant(core.limits, ctx.values.get(tenantLimitsKey));
      const result = await mergeRun(core, tenantOf(ctx), req.childRunId, req.parentRunId, {
        maxRunBytes: limits.maxRunBytes,
        signal: ctx.signal,
      });
      return {
        mergedAttachments: BigInt(result.merged),
        unchangedAttachments: BigInt(result.unchanged),
      };
    },

    async setRunTtl(req, ctx) {
      validateRequest(SetRunTtlRequestSchema, req);
      if (req.ttl === undefined) throw new ConnectError("ttl: required", Code.InvalidArgument);
      const expires = await core.runs.setTtl(
        tenantOf(ctx),
        req.runId,
        durationMs(req.ttl),
        ctx.signal,
      );
      return { expireTime: timestampFromMs(expires) };
    },

    getServerInfo(_req, ctx) {
      // Reported as they apply to the caller: a tenant's own limit only ever lowers the server's.
      const own = ctx.values.get(tenantLimitsKey);
      const limits = limitsForTenant(core.limits, own);
      const deadlineMs = callLimits.requestDeadlineMs ?? 0;
      const { connection } = callLimits;
      return create(GetServerInfoResponseSchema, {
        version: SPILLWAY_VERSION,
        backend: core.backend.kind,
        tenant: tenantOf(ctx),
        limits: {
          maxBlobBytes: BigInt(limits.maxBlobBytes),
          maxChunkBytes: BigInt(core.limits.maxChunkBytes),
          inlineBytes: BigInt(core.limits.inlineBytes),
          maxPatternBytes: 1024n,
          maxBytesWindow: BigInt(core.caps.maxBytesWindow),
          ...(limits.maxRunBytes === undefined ? {} : { maxRunBytes: BigInt(limits.maxRunBytes) }),
          maxInflightBytes: BigInt(callLimits.maxInflightBytes),
          maxInflightBytesPerTenant: BigInt(
            lowerLimit(callLimits.maxInflightBytesPerTenant, own.maxInflightBytes),
          ),
          maxCallsPerTenant: Math.min(callLimits.maxCallsPerTenant, own.maxCalls ?? Infinity),
          ...(deadlineMs > 0 ? { requestDeadline: durationFromMs(deadlineMs) } : {}),
          offloadIdleTimeout: durationFromMs(core.limits.idleStreamMs),
          ...(connection.idleMs > 0
            ? { connectionIdleTimeout: durationFromMs(connection.idleMs) }
            : {}),
          ...(connection.keepaliveMs > 0
            ? {
                keepaliveInterval: durationFromMs(connection.keepaliveMs),
                keepaliveTimeout: durationFromMs(connection.keepaliveTimeoutMs),
              }
            : {}),
        },
        caps: {
          maxWindowLines: core.caps.maxWindowLines,
          maxWindowChars: core.caps.maxWindowChars,
          maxLineChars: core.caps.maxLineChars,
          maxMatches: core.caps.maxMatches,
        },
        features: [
          "lines",
          "bytes",
          "search",
          "regex",
          "fork",
          "ttl",
          "inline",
          "preview_only",
          "offload_batch",
          "list_runs",
          "attempts",
          "jsonpath",
          "json_view",
          "ansi_strip",
          "rendered_only",
          "merge_run",
        ],
      });
    },
  };
}
