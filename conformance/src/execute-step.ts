import { createHash } from "node:crypto";
import { create, type JsonValue, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import {
  GetServerInfoResponseSchema,
  type Line,
  type Match,
  type OffloadRequest,
  OffloadRequestSchema,
  type OffloadResponse,
  type ReadToolOutputRequestSchema,
  type RunInfo,
  RunInfoSchema,
  type SpillwayService,
  type WindowHeader,
  WindowHeaderSchema,
  type WindowTrailer,
  WindowTrailerSchema,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import {
  ErrorInfoSchema,
  type ResultAttachment,
  ResultAttachmentSchema,
} from "@spillway/proto/spillway/v1/types_pb.js";
import { statusName } from "@spillway/wire";
import type { Expect, OffloadSpec, ReadSpec, RunRef, Step } from "./case.js";
import { mismatch } from "./match.js";
import { payloadBytes } from "./payload.js";

/** StepContext is what the steps of one case share while they run. */
export interface StepContext {
  /** Connect client of an actor, by actor name; undefined for an unknown actor. */
  client(actor: string): Client<typeof SpillwayService> | undefined;
  /** Tenant of an actor, by actor name. */
  tenant(actor: string): string | undefined;
  /** Scoped run id for a case-local run name (unique per execution and case). */
  scopedRun(run: string): string;
  /** The server's max_chunk_bytes. */
  readonly maxChunkBytes: number;
  /** Labels saved by earlier steps. */
  readonly saved: Map<string, string>;
  /** Deadline of each call. */
  readonly timeoutMs: number;
}

/** Outcome is what a call produced before expectations are checked. */
interface Outcome {
  readonly error?: ConnectError;
  /** Named values the expectation checks read. */
  readonly values: Readonly<Record<string, unknown>>;
}

const defaultChunkBytes = 64 * 1024;

/**
 * executeStep runs one step against the target and returns why it did not meet its
 * expectation, or undefined when it did. A call that fails with a code the step did not expect
 * is reported with its code and message.
 */
export async function executeStep(step: Step, ctx: StepContext): Promise<string | undefined> {
  if ("sleepMs" in step) {
    await new Promise((resolve) => setTimeout(resolve, step.sleepMs));
    return undefined;
  }
  const actor = step.as ?? "A";
  const client = ctx.client(actor);
  if (client === undefined) return `no actor ${actor} is configured`;
  const outcome = await capture(() => call(step, client, actor, ctx));
  return check(step.expect ?? {}, outcome, ctx, step.save);
}

async function capture(run: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await run();
  } catch (err) {
    return { error: ConnectError.from(err), values: {} };
  }
}

function runId(ref: RunRef, ctx: StepContext): string {
  if (ref.runRaw !== undefined) return ref.runRaw;
  return ctx.scopedRun(ref.run ?? "run");
}

const jsonOpts = { alwaysEmitImplicit: true } as const;

function attachmentJson(a: ResultAttachment | undefined): JsonValue | undefined {
  return a === undefined ? undefined : toJson(ResultAttachmentSchema, a, jsonOpts);
}

async function call(
  step: Step,
  client: Client<typeof SpillwayService>,
  actor: string,
  ctx: StepContext,
): Promise<Outcome> {
  const opts = { timeoutMs: ctx.timeoutMs };
  if ("offload" in step) return offload(step.offload, client, actor, ctx);
  if ("read" in step) return read(step.read, client, ctx);
  if ("stat" in step) {
    const res = await client.statToolOutput(
      { runId: runId(step.stat, ctx), handle: step.stat.handle },
      opts,
    );
    return { values: { attachment: attachmentJson(res.attachment), raw: res.attachment } };
  }
  if ("list" in step) {
    const res = await client.listToolOutputs(
      {
        runId: runId(step.list, ctx),
        pageSize: step.list.pageSize ?? 0,
        pageToken:
          step.list.pageTokenFrom === undefined
            ? (step.list.pageToken ?? "")
            : (ctx.saved.get(step.list.pageTokenFrom) ?? ""),
      },
      opts,
    );
    return {
      values: {
        handles: res.attachments.map((a) => a.handle),
        nextPage: res.nextPageToken !== "",
        nextPageToken: res.nextPageToken,
      },
    };
  }
  if ("listAll" in step) {
    const handles: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const res = await client.listToolOutputs(
        { runId: runId(step.listAll, ctx), pageSize: step.listAll.pageSize ?? 0, pageToken },
        opts,
      );
      pages++;
      handles.push(...res.attachments.map((a) => a.handle));
      pageToken = res.nextPageToken;
    } while (pageToken !== "" && pages < 10_000);
    return { values: { handles, pages } };
  }
  if ("listRuns" in step) {
    const spec = step.listRuns;
    const res = await client.listRuns(
      {
        pageSize: spec.pageSize ?? 0,
        pageToken:
          spec.pageTokenFrom === undefined
            ? (spec.pageToken ?? "")
            : (ctx.saved.get(spec.pageTokenFrom) ?? ""),
      },
      opts,
    );
    return {
      values: {
        ...caseRuns(res.runs, ctx),
        nextPage: res.nextPageToken !== "",
        nextPageToken: res.nextPageToken,
      },
    };
  }
  if ("listAllRuns" in step) {
    const pageSize = step.listAllRuns.pageSize ?? 0;
    const all: RunInfo[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const res = await client.listRuns({ pageSize, pageToken }, opts);
      pages++;
      if (pageSize > 0 && res.runs.length > pageSize) {
        throw new ConnectError(
          `ListRuns page ${pages} held ${res.runs.length} runs, asked for ${pageSize}`,
          Code.OutOfRange,
        );
      }
      all.push(...res.runs);
      pageToken = res.nextPageToken;
    } while (pageToken !== "" && pages < 10_000);
    return { values: { ...caseRuns(all, ctx), pages } };
  }
  if ("deleteRun" in step) {
    const res = await client.deleteRun({ runId: runId(step.deleteRun, ctx) }, opts);
    return { values: { deletedAttachments: Number(res.deletedAttachments) } };
  }
  if ("forkRun" in step) {
    const { parent, child, ttlSeconds } = step.forkRun;
    const res = await client.forkRun(
      {
        parentRunId: ctx.scopedRun(parent),
        childRunId: ctx.scopedRun(child),
        ...(ttlSeconds === undefined ? {} : { ttl: { seconds: BigInt(ttlSeconds), nanos: 0 } }),
      },
      opts,
    );
    return { values: { forkedAttachments: Number(res.forkedAttachments) } };
  }
  if ("mergeRun" in step) {
    const res = await client.mergeRun(
      {
        childRunId: ctx.scopedRun(step.mergeRun.child),
        parentRunId: ctx.scopedRun(step.mergeRun.parent),
      },
      opts,
    );
    return {
      values: {
        mergedAttachments: Number(res.mergedAttachments),
        unchangedAttachments: Number(res.unchangedAttachments),
      },
    };
  }
  if ("setRunTtl" in step) {
    const res = await client.setRunTtl(
      {
        runId: runId(step.setRunTtl, ctx),
        ttl: { seconds: BigInt(step.setRunTtl.ttlSeconds), nanos: 0 },
      },
      opts,
    );
    return { values: { expireTimeSet: res.expireTime !== undefined } };
  }
  const res = await client.getServerInfo({}, opts);
  return { values: { info: toJson(GetServerInfoResponseSchema, res, jsonOpts) } };
}

/**
 * The case's own runs of a listing, by case-local name: `runNames` sorted and `runs` as proto
 * JSON with case-local run and parent ids. A run listed twice fails the step (ALREADY_EXISTS).
 */
function caseRuns(
  listed: readonly RunInfo[],
  ctx: StepContext,
): { runNames: string[]; runs: Record<string, unknown> } {
  const seen = new Set<string>();
  for (const run of listed) {
    if (seen.has(run.runId)) {
      throw new ConnectError(`ListRuns listed run ${run.runId} twice`, Code.AlreadyExists);
    }
    seen.add(run.runId);
  }
  const scope = ctx.scopedRun("");
  const local = (id: string) => (id.startsWith(scope) ? id.slice(scope.length) : id);
  const runs: Record<string, unknown> = {};
  for (const run of listed) {
    if (!run.runId.startsWith(scope)) continue;
    const json = toJson(RunInfoSchema, run, jsonOpts) as Record<string, unknown>;
    runs[local(run.runId)] = {
      ...json,
      runId: local(run.runId),
      parentRunId: local(run.parentRunId),
    };
  }
  return { runNames: Object.keys(runs).sort(), runs };
}

async function offload(
  spec: OffloadSpec,
  client: Client<typeof SpillwayService>,
  actor: string,
  ctx: StepContext,
): Promise<Outcome> {
  const bytes = payloadBytes(spec.data);
  const digest = createHash("sha256").update(bytes).digest("hex");
  const tenant = spec.tenantRaw ?? ctx.tenant(spec.tenant ?? actor) ?? "";
  const header: OffloadRequest = create(OffloadRequestSchema, {
    msg: {
      case: "header",
      value: {
        key: {
          tenant,
          runId: runId(spec, ctx),
          callId: spec.call,
          ...(spec.attempt === undefined ? {} : { attempt: spec.attempt }),
        },
        ...(spec.slot === undefined ? {} : { slot: spec.slot }),
        name: spec.name ?? "",
        contentType: spec.contentType ?? "",
        ...(spec.expectedSize === undefined
          ? {}
          : {
              expectedSize: BigInt(
                spec.expectedSize === "$size" ? bytes.byteLength : spec.expectedSize,
              ),
            }),
        ...(spec.expectedSha256 === undefined
          ? {}
          : { expectedSha256: spec.expectedSha256 === "$sha256" ? digest : spec.expectedSha256 }),
        ...(spec.observedBytes === undefined ? {} : { observedBytes: BigInt(spec.observedBytes) }),
        truncated: spec.truncated ?? false,
        ...(spec.ttlSeconds === undefined
          ? {}
          : { ttl: { seconds: BigInt(spec.ttlSeconds), nanos: 0 } }),
        ...(spec.preview === undefined ? {} : { preview: spec.preview }),
        previewOnly: spec.previewOnly ?? false,
      },
    },
  });
  const chunkBytes = spec.chunkBytes ?? defaultChunkBytes;
  const chunks: Uint8Array[] = spec.oversizeChunk
    ? [new Uint8Array(ctx.maxChunkBytes + 1)]
    : Array.from({ length: Math.ceil(bytes.byteLength / chunkBytes) }, (_, i) =>
        bytes.subarray(i * chunkBytes, (i + 1) * chunkBytes),
      );
  const res = spec.batch
    ? await offloadAsBatchItem(client, spec.omitHeader ? undefined : header, chunks, ctx)
    : await client.offload(streamOf(header, chunks, spec), { timeoutMs: ctx.timeoutMs });
  return {
    values: {
      attachment: attachmentJson(res.attachment),
      raw: res.attachment,
      created: res.created,
      payloadSha256: digest,
    },
  };
}

/** The Offload stream of a step: the header (unless omitted, or twice), then the chunks. */
async function* streamOf(header: OffloadRequest, chunks: readonly Uint8Array[], spec: OffloadSpec) {
  if (!spec.omitHeader) yield header;
  if (spec.duplicateHeader) yield header;
  for (const chunk of chunks) {
    yield create(OffloadRequestSchema, { msg: { case: "chunk", value: chunk } });
  }
}

/**
 * Offloads a step's payload as the one item of an OffloadBatch and returns the item's response,
 * or throws its error as the call's status, so a step's expectations read the same either way.
 */
async function offloadAsBatchItem(
  client: Client<typeof SpillwayService>,
  header: OffloadRequest | undefined,
  chunks: readonly Uint8Array[],
  ctx: StepContext,
): Promise<OffloadResponse> {
  const item = {
    ...(header?.msg.case === "header" ? { header: header.msg.value } : {}),
    data: Buffer.concat(chunks),
  };
  const res = await client.offloadBatch({ items: [item] }, { timeoutMs: ctx.timeoutMs });
  const result = res.results[0]?.result;
  if (res.results.length !== 1 || result === undefined || result.case === undefined) {
    throw new ConnectError(
      `OffloadBatch answered ${res.results.length} results for one item`,
      Code.Internal,
    );
  }
  if (result.case === "error") throw new ConnectError(result.value.message, result.value.code);
  return result.value;
}

function readRequest(
  spec: ReadSpec,
  ctx: StepContext,
): MessageInitShape<typeof ReadToolOutputRequestSchema> {
  const base = {
    runId: runId(spec, ctx),
    handle: spec.handle,
    omitRendered: !!spec.omitRendered,
    keepAnsi: !!spec.keepAnsi,
    renderedOnly: !!spec.renderedOnly,
  };
  if (spec.bytes !== undefined) {
    const { offset, limit } = spec.bytes;
    return {
      ...base,
      window: {
        case: "bytes",
        value: {
          offset: BigInt(offset ?? 0),
          ...(limit === undefined ? {} : { limit: BigInt(limit) }),
        },
      },
    };
  }
  if (spec.jsonPath !== undefined) {
    const j = spec.jsonPath;
    return {
      ...base,
      window: {
        case: "jsonPath",
        value: {
          query: j.query,
          ...(j.maxMatches === undefined ? {} : { maxMatches: j.maxMatches }),
          skip: BigInt(j.skip ?? 0),
        },
      },
    };
  }
  if (spec.search !== undefined) {
    const s = spec.search;
    const pattern = (s.pattern ?? "").repeat(s.patternRepeat ?? 1);
    return {
      ...base,
      window: {
        case: "search",
        value: {
          pattern,
          regex: s.regex ?? false,
          ignoreCase: s.ignoreCase ?? false,
          ...(s.maxMatches === undefined ? {} : { maxMatches: s.maxMatches }),
          skip: BigInt(s.skip ?? 0),
          contextLines: s.contextLines ?? 0,
        },
      },
    };
  }
  if (spec.json !== undefined) {
    const { offset, limit, fromEnd } = spec.json;
    return {
      ...base,
      window: {
        case: "json",
        value: {
          offset: BigInt(offset ?? 0),
          ...(limit === undefined ? {} : { limit }),
          fromEnd: fromEnd ?? false,
        },
      },
    };
  }
  if (spec.lines !== undefined) {
    const { offset, limit, fromEnd } = spec.lines;
    return {
      ...base,
      window: {
        case: "lines",
        value: {
          offset: BigInt(offset ?? 0),
          ...(limit === undefined ? {} : { limit }),
          fromEnd: fromEnd ?? false,
        },
      },
    };
  }
  return base;
}

async function read(
  spec: ReadSpec,
  client: Client<typeof SpillwayService>,
  ctx: StepContext,
): Promise<Outcome> {
  let header: WindowHeader | undefined;
  let trailer: WindowTrailer | undefined;
  const lines: Line[] = [];
  const matches: Match[] = [];
  const nodes: { path: string; value: string }[] = [];
  const data: Uint8Array[] = [];
  for await (const frame of client.readToolOutput(readRequest(spec, ctx), {
    timeoutMs: ctx.timeoutMs,
  })) {
    const f = frame.frame;
    if (f.case === "header") header = f.value;
    else if (f.case === "trailer") trailer = f.value;
    else if (f.case === "content") {
      const body = f.value.body;
      if (body.case === "lines") lines.push(...body.value.lines);
      else if (body.case === "matches") matches.push(...body.value.matches);
      else if (body.case === "nodes") {
        nodes.push(...body.value.nodes.map((n) => ({ path: n.path, value: n.value })));
      } else if (body.case === "data") data.push(body.value);
    }
  }
  const bytes = Buffer.concat(data);
  const trailerJson =
    trailer === undefined ? undefined : toJson(WindowTrailerSchema, trailer, jsonOpts);
  if (trailerJson !== undefined && trailerJson !== null && typeof trailerJson === "object") {
    delete (trailerJson as Record<string, unknown>).rendered;
  }
  return {
    values: {
      rendered: trailer?.rendered,
      header: header === undefined ? undefined : toJson(WindowHeaderSchema, header, jsonOpts),
      trailer: trailerJson,
      lineTexts: lines.map((l) => l.text),
      lineNumbers: lines.map((l) => Number(l.number)),
      matchNumbers: matches.map((m) => Number(m.line?.number ?? -1)),
      nodes,
      bytesText: bytes.toString("utf8"),
      bytesSha256: createHash("sha256").update(bytes).digest("hex"),
    },
  };
}

function check(
  expect: Expect,
  outcome: Outcome,
  ctx: StepContext,
  save: string | undefined,
): string | undefined {
  const wanted = expect.code ?? "OK";
  const { error, values } = outcome;
  if (error !== undefined) {
    const got = statusName(error.code);
    if (got !== wanted) return `expected ${wanted}, got ${got}: ${error.rawMessage}`;
    const reason = error.findDetails(ErrorInfoSchema)[0]?.reason;
    if (expect.reason !== undefined && reason !== expect.reason) {
      return `expected reason ${expect.reason}, got ${reason ?? "none"}`;
    }
    for (const s of expect.messageContains ?? []) {
      if (!error.rawMessage.includes(s))
        return `message ${JSON.stringify(error.rawMessage)} lacks ${JSON.stringify(s)}`;
    }
    for (const s of expect.messageNotContains ?? []) {
      if (error.rawMessage.includes(s))
        return `message ${JSON.stringify(error.rawMessage)} contains ${JSON.stringify(s)}`;
    }
    return undefined;
  }
  if (wanted !== "OK") {
    const shown = typeof values.rendered === "string" ? `: ${values.rendered.slice(0, 200)}` : "";
    return `expected ${wanted}, got OK${shown}`;
  }
  if (save !== undefined) {
    const value = values.payloadSha256 ?? values.rendered ?? values.nextPageToken;
    if (typeof value === "string") ctx.saved.set(save, value);
  }
  return checkValues(expect, values, ctx);
}

function checkValues(
  expect: Expect,
  values: Readonly<Record<string, unknown>>,
  ctx: StepContext,
): string | undefined {
  const rendered = typeof values.rendered === "string" ? values.rendered : undefined;
  if (expect.rendered !== undefined && rendered !== expect.rendered) {
    return renderedDiff(expect.rendered, rendered);
  }
  for (const s of expect.renderedContains ?? []) {
    if (!rendered?.includes(s)) {
      return `rendered lacks ${JSON.stringify(clip(s))}: ${JSON.stringify(clip(rendered))}`;
    }
  }
  for (const s of expect.renderedNotContains ?? []) {
    if (rendered?.includes(s)) return `rendered contains ${JSON.stringify(s)}`;
  }
  if (expect.renderedEquals !== undefined && rendered !== ctx.saved.get(expect.renderedEquals)) {
    return `rendered differs from the text saved as ${expect.renderedEquals}`;
  }
  if (
    expect.sha256OfPayload &&
    (values.raw as ResultAttachment | undefined)?.sha256 !== values.payloadSha256
  ) {
    return "attachment.sha256 is not the payload's digest";
  }
  if (
    expect.bytesSha256Of !== undefined &&
    values.bytesSha256 !== ctx.saved.get(expect.bytesSha256Of)
  ) {
    return `returned bytes do not hash to the payload saved as ${expect.bytesSha256Of}`;
  }
  const partial = [
    "created",
    "attachment",
    "header",
    "trailer",
    "lineTexts",
    "lineNumbers",
    "matchNumbers",
    "nodes",
    "bytesText",
    "handles",
    "runNames",
    "runs",
    "nextPage",
    "pages",
    "deletedAttachments",
    "forkedAttachments",
    "mergedAttachments",
    "unchangedAttachments",
    "expireTimeSet",
    "info",
  ] as const;
  for (const field of partial) {
    if (expect[field] === undefined) continue;
    const m = mismatch(expect[field], values[field], field);
    if (m !== undefined) return m;
  }
  return undefined;
}

/** renderedDiff names the first line where the rendered text differs, on one line. */
function renderedDiff(expected: string, got: string | undefined): string {
  if (got === undefined) return "no rendered text";
  const want = expected.split("\n");
  const have = got.split("\n");
  const i = want.findIndex((line, n) => have[n] !== line);
  const at = i === -1 ? want.length : i;
  return `rendered differs at line ${at + 1}: expected ${JSON.stringify(clip(want[at]))}, got ${JSON.stringify(clip(have[at]))}`;
}

function clip(text: string | undefined): string {
  if (text === undefined) return "(none)";
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
