import { randomBytes } from "node:crypto";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type GetServerInfoResponse,
  SpillwayService,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { ConformanceCase } from "./case.js";
import { executeStep } from "./execute-step.js";
import { defaultCapsFeature, type VectorCaps } from "./window-vectors.js";

/** Actor is a caller the cases can act as: a bearer token (none in dev mode) and its tenant. */
export interface Actor {
  readonly name: string;
  readonly token?: string;
  readonly tenant: string;
}

/** CaseStatus is how a case ended: passed, failed, skipped for a feature, or known failing. */
export type CaseStatus = "pass" | "fail" | "skip" | "xfail";

/** CaseResult is the outcome of one case; detail says why it failed or was skipped. */
export interface CaseResult {
  readonly name: string;
  readonly status: CaseStatus;
  readonly detail?: string;
}

/** ConformanceReport holds every case's result, in case order, and the counts. */
export interface ConformanceReport {
  readonly results: readonly CaseResult[];
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly knownFailing: number;
  /** The features the run treated as declared. */
  readonly features: readonly string[];
}

/** RunConformanceOptions configures one run of the suite against one target. */
export interface RunConformanceOptions {
  /** Base URL of the target, e.g. `http://127.0.0.1:50051`. */
  readonly target: string;
  readonly cases: readonly ConformanceCase[];
  /**
   * Actors; `A` must be present, `B` (another tenant) enables `multi-tenant` cases. Any actor
   * with a token enables `auth` cases. Default: `A` without a token as tenant `dev` (dev mode).
   */
  readonly actors?: readonly Actor[];
  /** Declared features, or `auto` (default) for the ones GetServerInfo lists. */
  readonly features?: readonly string[] | "auto";
  /** Only cases whose name matches run. */
  readonly run?: RegExp;
  /** Cases whose name matches are left out. */
  readonly skip?: RegExp;
  /** Names of cases known to fail; such a case passing fails the run. */
  readonly knownFailing?: readonly string[];
  /** Caps the window vectors were rendered with; equal server caps declare `default-caps`. */
  readonly vectorCaps?: VectorCaps;
  /** Cases run at the same time; default 4. */
  readonly concurrency?: number;
  /** Deadline of each call; default 30 s. */
  readonly timeoutMs?: number;
  /** Called with each result, in case order, as soon as it and all earlier ones are known. */
  readonly onResult?: (result: CaseResult) => void;
  /** Transport factory; default gRPC over HTTP/2 to target. */
  readonly transport?: (token: string | undefined) => Transport;
}

/** unknownTokenActor and anonymousActor are built-in actors for authentication cases. */
export const anonymousActor = "anonymous";
/** unknownTokenActor sends a bearer token that no token file maps to a tenant. */
export const unknownTokenActor = "unknown-token";

/**
 * runConformance runs every selected case against the target, each with its own run ids (a
 * per-execution random prefix), and reports each case as passed, failed, skipped (a required
 * feature is not declared; never counted as passed) or known failing. A known-failing case
 * that passes is reported as failed.
 */
export async function runConformance(opts: RunConformanceOptions): Promise<ConformanceReport> {
  const actors = opts.actors ?? [{ name: "A", tenant: "dev" }];
  const transportFor =
    opts.transport ??
    ((token: string | undefined) =>
      createGrpcTransport({
        baseUrl: opts.target,
        readMaxBytes: 64 * 1024 * 1024,
        interceptors: [
          (next) => (req) => {
            if (token !== undefined) req.header.set("authorization", `Bearer ${token}`);
            return next(req);
          },
        ],
      }));
  const clients = new Map<string, Client<typeof SpillwayService>>();
  for (const a of actors) clients.set(a.name, createClient(SpillwayService, transportFor(a.token)));
  clients.set(anonymousActor, createClient(SpillwayService, transportFor(undefined)));
  clients.set(
    unknownTokenActor,
    createClient(SpillwayService, transportFor("spillway-conformance-unknown-token")),
  );
  const first = clients.get(actors[0]?.name ?? "A");
  if (first === undefined) throw new TypeError("runConformance needs at least one actor");
  const info = await first.getServerInfo({}, { timeoutMs: opts.timeoutMs ?? 30_000 });
  const features = declaredFeatures(opts, actors, info);
  const known = new Set(opts.knownFailing ?? []);
  const prefix = `cf${randomBytes(4).toString("hex")}`;
  const tenants = new Map(actors.map((a) => [a.name, a.tenant]));

  const selected = opts.cases.filter(
    (c) => (opts.run?.test(c.name) ?? true) && !(opts.skip?.test(c.name) ?? false),
  );
  const results: (CaseResult | undefined)[] = selected.map(() => undefined);
  let reported = 0;
  const flush = () => {
    for (let r = results[reported]; r !== undefined; r = results[reported]) {
      opts.onResult?.(r);
      reported++;
    }
  };

  const runOne = async (index: number): Promise<CaseResult> => {
    const c = selected[index] as ConformanceCase;
    const missing = (c.features ?? []).find((f) => !features.includes(f));
    if (missing !== undefined) {
      return { name: c.name, status: "skip", detail: `feature ${missing} not declared` };
    }
    const saved = new Map<string, string>();
    let failure: string | undefined;
    for (const [i, step] of c.steps.entries()) {
      failure = await executeStep(step, {
        client: (name) => clients.get(name),
        tenant: (name) => tenants.get(name),
        scopedRun: (run) => `${prefix}-${index}-${run}`,
        maxChunkBytes: Number(info.limits?.maxChunkBytes ?? 4n * 1024n * 1024n),
        saved,
        timeoutMs: opts.timeoutMs ?? 30_000,
      });
      if (failure !== undefined) {
        failure = `step ${i + 1}: ${failure}`;
        break;
      }
    }
    if (known.has(c.name)) {
      return failure === undefined
        ? {
            name: c.name,
            status: "fail",
            detail: "now passes; remove it from the known-failing list",
          }
        : { name: c.name, status: "xfail", detail: failure };
    }
    return failure === undefined
      ? { name: c.name, status: "pass" }
      : { name: c.name, status: "fail", detail: failure };
  };

  let next = 0;
  const worker = async () => {
    while (next < selected.length) {
      const index = next++;
      results[index] = await runOne(index);
      flush();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 4) }, worker));
  const done = results as CaseResult[];
  const count = (s: CaseStatus) => done.filter((r) => r.status === s).length;
  return {
    results: done,
    passed: count("pass"),
    failed: count("fail"),
    skipped: count("skip"),
    knownFailing: count("xfail"),
    features,
  };
}

function declaredFeatures(
  opts: RunConformanceOptions,
  actors: readonly Actor[],
  info: GetServerInfoResponse,
): string[] {
  const declared =
    opts.features === undefined || opts.features === "auto" ? info.features : opts.features;
  const derived: string[] = [];
  if (actors.some((a) => a.name === "B" && a.tenant !== actors[0]?.tenant))
    derived.push("multi-tenant");
  if (actors.some((a) => a.token !== undefined)) derived.push("auth");
  const caps = info.caps;
  const want = opts.vectorCaps;
  if (
    want !== undefined &&
    caps !== undefined &&
    caps.maxWindowLines === want.maxWindowLines &&
    caps.maxWindowChars === want.maxWindowChars &&
    caps.maxLineChars === want.maxLineChars &&
    caps.maxMatches === want.maxMatches
  ) {
    derived.push(defaultCapsFeature);
  }
  return [...new Set([...declared, ...derived])];
}
