import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { PayloadSpec } from "./payload.js";

/** RunRef names a run: `run` is scoped to the case (prefixed per execution), `runRaw` is sent as is. */
export interface RunRef {
  readonly run?: string;
  readonly runRaw?: string;
}

/** OffloadSpec describes one Offload stream. */
export interface OffloadSpec extends RunRef {
  readonly call: string;
  readonly slot?: string;
  /** BlobKey.attempt: 0 or 1 (or unset) for the first attempt, 2 and up for retries. */
  readonly attempt?: number;
  /** Actor whose tenant goes into the key; default the calling actor. */
  readonly tenant?: string;
  /** A literal tenant for the key, overriding `tenant`. */
  readonly tenantRaw?: string;
  readonly data?: PayloadSpec;
  readonly name?: string;
  readonly contentType?: string;
  /** A number, or `"$size"` for the payload's real size. */
  readonly expectedSize?: number | "$size";
  /** A hex digest, or `"$sha256"` for the payload's real digest. */
  readonly expectedSha256?: string;
  readonly observedBytes?: number;
  readonly truncated?: boolean;
  readonly ttlSeconds?: number;
  readonly previewOnly?: boolean;
  readonly preview?: {
    readonly headChars?: number;
    readonly tailChars?: number;
    /** Keep terminal escape sequences in the preview. */
    readonly keepAnsi?: boolean;
  };
  /** Bytes per chunk message; default 65536. */
  readonly chunkBytes?: number;
  /** Send one chunk of the server's max_chunk_bytes + 1 instead of the payload. */
  readonly oversizeChunk?: boolean;
  /** Send the chunks without a header first. */
  readonly omitHeader?: boolean;
  /** Send the header twice. */
  readonly duplicateHeader?: boolean;
  /**
   * Send the payload as the one item of an OffloadBatch instead of an Offload stream; the
   * item's outcome is checked as the call's would be (an item error as the call's status).
   * Chunking options do not apply.
   */
  readonly batch?: boolean;
}

/** ReadSpec describes one ReadToolOutput call; at most one window. */
export interface ReadSpec extends RunRef {
  readonly handle: string;
  readonly lines?: {
    readonly offset?: number;
    readonly limit?: number;
    readonly fromEnd?: boolean;
  };
  readonly bytes?: { readonly offset?: number; readonly limit?: number };
  /** A window of the JSON view. */
  readonly json?: {
    readonly offset?: number;
    readonly limit?: number;
    readonly fromEnd?: boolean;
  };
  readonly search?: {
    readonly pattern?: string;
    /** The pattern is `pattern` repeated this many times (long-pattern cases). */
    readonly patternRepeat?: number;
    readonly regex?: boolean;
    readonly ignoreCase?: boolean;
    readonly maxMatches?: number;
    readonly skip?: number;
    readonly contextLines?: number;
  };
  /** A JSONPath window (RFC 9535 query). */
  readonly jsonPath?: {
    readonly query: string;
    readonly maxMatches?: number;
    readonly skip?: number;
  };
  readonly omitRendered?: boolean;
  /** Keep terminal escape sequences in the model-facing text. */
  readonly keepAnsi?: boolean;
  /** Ask for the header and the trailer only (`rendered_only`). */
  readonly renderedOnly?: boolean;
}

/** Expect is what a step must produce; unset fields are not checked. */
export interface Expect {
  /** gRPC code name (`OK`, `PERMISSION_DENIED`, …); default `OK`. */
  readonly code?: string;
  /** `spillway.v1.ErrorInfo` reason of a failed call. */
  readonly reason?: string;
  readonly messageContains?: readonly string[];
  readonly messageNotContains?: readonly string[];
  /** Offload: whether the record was newly created. */
  readonly created?: boolean;
  /** Offload and stat: partial ResultAttachment in proto JSON form (`$present`/`$absent` allowed). */
  readonly attachment?: Readonly<Record<string, unknown>>;
  /** Offload and stat: the attachment's sha256 equals the digest of the offloaded payload. */
  readonly sha256OfPayload?: boolean;
  /** Read: the exact rendered text. */
  readonly rendered?: string;
  readonly renderedContains?: readonly string[];
  readonly renderedNotContains?: readonly string[];
  /** Read: rendered equals the text an earlier step saved under this label. */
  readonly renderedEquals?: string;
  /** Read: partial WindowHeader / WindowTrailer in proto JSON form. */
  readonly header?: Readonly<Record<string, unknown>>;
  readonly trailer?: Readonly<Record<string, unknown>>;
  /** Read (lines mode): the returned lines' texts and numbers. */
  readonly lineTexts?: readonly string[];
  readonly lineNumbers?: readonly number[];
  /** Read (search mode): the matching lines' numbers. */
  readonly matchNumbers?: readonly number[];
  /** Read (JSONPath mode): the nodes' normalized paths and compact values, in order. */
  readonly nodes?: readonly { readonly path: string; readonly value: string }[];
  /** Read (bytes mode): the returned bytes as UTF-8 text. */
  readonly bytesText?: string;
  /** Read (bytes mode): sha256 of the returned bytes equals the payload digest saved under this label. */
  readonly bytesSha256Of?: string;
  /** List: handles of the page (or of all pages for listAll), in order. */
  readonly handles?: readonly string[];
  /** List: whether a next page token was returned. */
  readonly nextPage?: boolean;
  /** ListAll: number of pages read. */
  readonly pages?: number;
  /**
   * ListRuns / ListAllRuns: the case's own runs the listing holds, by case-local name, sorted
   * (runs of other cases and executions in the tenant are left out; a duplicate fails the step).
   */
  readonly runNames?: readonly string[];
  /**
   * ListRuns / ListAllRuns: partial RunInfo in proto JSON form by case-local run name, or
   * `"$absent"` for a run that must not be listed; `runId` and a `parentRunId` of the case are
   * given as case-local names.
   */
  readonly runs?: Readonly<Record<string, unknown>>;
  readonly deletedAttachments?: number;
  readonly forkedAttachments?: number;
  /** MergeRun: outputs the parent gained, and those it already held with the same bytes. */
  readonly mergedAttachments?: number;
  readonly unchangedAttachments?: number;
  /** SetRunTtl: an expiry time was returned. */
  readonly expireTimeSet?: boolean;
  /** ServerInfo: partial GetServerInfoResponse in proto JSON form. */
  readonly info?: Readonly<Record<string, unknown>>;
}

/** StepAction is the one operation of a step. */
export type StepAction =
  | { readonly offload: OffloadSpec }
  | { readonly read: ReadSpec }
  | { readonly stat: RunRef & { readonly handle: string } }
  | {
      readonly list: RunRef & {
        readonly pageSize?: number;
        readonly pageToken?: string;
        /** Send the next_page_token an earlier list step saved under this label. */
        readonly pageTokenFrom?: string;
      };
    }
  | { readonly listAll: RunRef & { readonly pageSize?: number } }
  | {
      /** One ListRuns page; `save` keeps its next_page_token. */
      readonly listRuns: {
        readonly pageSize?: number;
        readonly pageToken?: string;
        /** Send the next_page_token an earlier step saved under this label. */
        readonly pageTokenFrom?: string;
      };
    }
  | {
      /**
       * Every ListRuns page of the actor's tenant: each page must hold at most pageSize runs
       * (when set) and no run may appear twice across the pages.
       */
      readonly listAllRuns: { readonly pageSize?: number };
    }
  | { readonly deleteRun: RunRef }
  | {
      readonly forkRun: {
        readonly parent: string;
        readonly child: string;
        readonly ttlSeconds?: number;
      };
    }
  | {
      /** MergeRun of case-local runs child into parent. */
      readonly mergeRun: { readonly child: string; readonly parent: string };
    }
  | { readonly setRunTtl: RunRef & { readonly ttlSeconds: number } }
  | { readonly serverInfo: Readonly<Record<string, never>> }
  | { readonly sleepMs: number };

/** Step is one call of a case, the actor making it, and what it must produce. */
export type Step = StepAction & {
  /** Actor name (`A`, `B`, `anonymous`, `unknown-token`); default `A`. */
  readonly as?: string;
  readonly expect?: Expect;
  /**
   * Label under which an offload saves its payload digest, a read its rendered text, or a list
   * its next_page_token.
   */
  readonly save?: string;
};

/** ConformanceCase is one independent, named scenario. */
export interface ConformanceCase {
  readonly name: string;
  /** Features the target must declare for the case to run. */
  readonly features?: readonly string[];
  readonly steps: readonly Step[];
}

/**
 * loadCases reads every `*.json` file of dir (each a JSON array of cases), in file-name order,
 * and guarantees unique, non-empty case names with at least one step each.
 */
export async function loadCases(dir: string): Promise<ConformanceCase[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".json")).sort();
  const cases: ConformanceCase[] = [];
  for (const file of files) {
    const parsed: unknown = JSON.parse(await readFile(join(dir, file), "utf8"));
    if (!Array.isArray(parsed)) {
      throw new ConnectError(`${file}: expected a JSON array of cases`, Code.InvalidArgument);
    }
    cases.push(...(parsed as ConformanceCase[]));
  }
  checkCases(cases);
  return cases;
}

/** checkCases throws INVALID_ARGUMENT unless every case has a unique name and steps. */
export function checkCases(cases: readonly ConformanceCase[]): void {
  const seen = new Set<string>();
  for (const c of cases) {
    if (typeof c.name !== "string" || c.name === "") {
      throw new ConnectError("a case has no name", Code.InvalidArgument);
    }
    if (seen.has(c.name)) {
      throw new ConnectError(`duplicate case name ${c.name}`, Code.InvalidArgument);
    }
    if (!Array.isArray(c.steps) || c.steps.length === 0) {
      throw new ConnectError(`case ${c.name} has no steps`, Code.InvalidArgument);
    }
    seen.add(c.name);
  }
}
