import { Code, ConnectError } from "@connectrpc/connect";
import type { ResultAttachment } from "@spillway/proto/spillway/v1/types_pb.js";
import type { OffloadKey, OffloadOptions, SpillwayCallOptions, SpillwayClient } from "./client.js";
import { jsonText } from "./json-text.js";
import { modelText } from "./model-text.js";
import { createAttemptTracker, offloadNextAttempt } from "./offload-next-attempt.js";
import { createPerToolPolicy, hasToolRules } from "./per-tool-policy.js";
import { readToolOutputToolName } from "./read-tool-output-tool.js";
import {
  isSummarizeAction,
  runSummarizer,
  type SummarizeAction,
  type SummaryFailure,
  summarizedText,
  validateSummarizeAction,
} from "./summarize-action.js";
import { countChars, type TruncateMode, truncateText } from "./truncate-text.js";

/**
 * ElisionAction is what a band does with a tool result: keep it, cut it, offload it, or offload
 * it and show a summary (SummarizeAction).
 */
export type ElisionAction =
  | "passthrough"
  | "spill"
  | { readonly truncate: TruncateMode }
  | SummarizeAction;

/** ElisionBand applies action to results whose measured size is at most upTo (no upTo: any size). */
export interface ElisionBand {
  /** Inclusive upper bound in the policy's measure; omitted on the last, catch-all band. */
  readonly upTo?: number;
  /** What to do with a result in this band. */
  readonly action: ElisionAction;
}

/** ToolElisionOverride replaces the policy's bands and/or truncateBudget for some tools. */
export interface ToolElisionOverride {
  /** Bands for these tools, in place of the policy's (same rules). */
  readonly bands?: readonly ElisionBand[];
  /** Truncation budget for these tools, in the policy's measure. */
  readonly truncateBudget?: number;
}

/** ElisionPolicyOptions configure createElisionPolicy. */
export interface ElisionPolicyOptions {
  /** Bands in ascending upTo order; the last one must have no upTo. */
  readonly bands: readonly ElisionBand[];
  /**
   * Overrides per tool, keyed by tool name or glob pattern (`*` any run of characters, `?` one).
   * The exact name wins, then the matching pattern with the most literal characters, then the
   * one that sorts first. A tool no key matches uses bands and truncateBudget.
   */
  readonly perTool?: Readonly<Record<string, ToolElisionOverride>>;
  /** Only tools matching one of these names or patterns are elided; default every tool. */
  readonly include?: readonly string[];
  /** Tools matching one of these names or patterns pass through untouched; wins over include. */
  readonly exclude?: readonly string[];
  /**
   * Unit of upTo and truncateBudget: `chars` (Unicode code points) or `tokens`, estimated as
   * ceil(chars / 4) — a cheap, tokenizer-free estimate that every SDK computes the same way.
   * Default `chars`.
   */
  readonly measure?: "chars" | "tokens";
  /**
   * What a spill does when the service is unavailable (after offload's retries): `truncate`
   * keeps head and tail; `{ truncate: mode }` picks the part. Default `truncate`.
   */
  readonly fallback?: "truncate" | { readonly truncate: TruncateMode };
  /**
   * `best_effort` (default) lets a spill fall back when the service is down; `required` fails
   * it instead with a ConnectError (UNAVAILABLE) whose message starts with `blob_store_required`.
   */
  readonly preservation?: "best_effort" | "required";
  /** Characters (or tokens) a truncation keeps, marker excluded; default 2000. */
  readonly truncateBudget?: number;
  /**
   * Keep terminal escape sequences in the text the policy shows (passthrough, truncated,
   * preview_only) and in spilled previews. By default they are removed from what the model
   * sees and the result is measured without them; a spill stores the result as given.
   */
  readonly keepAnsi?: boolean;
}

/** ElisionInput is one tool result for ElisionPolicy.apply. */
export interface ElisionInput {
  /**
   * Where a spill offloads the result. Without an attempt, a call id this policy (or anyone)
   * already spilled with other bytes becomes the call's next attempt (`res@2_<call_id>`, …: see
   * offloadNextAttempt), so a re-executed tool call keeps every attempt; with one, that attempt.
   */
  readonly key: OffloadKey;
  /**
   * The result: text, or a JSON value (measured and shown as compact JSON, as JSON.stringify
   * writes it). A value JSON.stringify writes nothing for (undefined: a tool that returned
   * nothing; a function; a symbol) passes through as empty text.
   */
  readonly content: string | { readonly json: unknown };
  /** The client a spill offloads through. */
  readonly client: SpillwayClient;
  /** The tool that produced the result; `read_tool_output` results always pass through. */
  readonly toolName?: string;
  /** Header fields for a spill (name, content type, TTL, preview sizes, …). */
  readonly offload?: OffloadOptions;
  /** Deadline and cancellation of a spill. */
  readonly call?: SpillwayCallOptions;
}

/** ElisionResult is what goes into the model's context in place of a tool result. */
export interface ElisionResult {
  /**
   * `passthrough`: text is the content; `truncated`: a cut version with a marker; `spilled`:
   * the server's preview text naming the handle; `preview_only`: the service was down, so a
   * locally cut version, with no handle, stands in for the result; `summarized`: the output
   * was stored and text is a line naming the handle followed by the summarizer's summary.
   */
  readonly kind: "passthrough" | "truncated" | "spilled" | "summarized" | "preview_only";
  /** The text to give the model. */
  readonly text: string;
  /** The committed record, for `spilled` and `summarized`. */
  readonly attachment?: ResultAttachment;
  /** The content's size in the policy's measure. */
  readonly size: number;
  /** Why a summarize band showed the spilled view (kind `spilled`) instead of a summary. */
  readonly summaryFailure?: SummaryFailure;
}

/** ElisionPolicy decides, per tool result, what the model sees. */
export interface ElisionPolicy {
  /**
   * apply measures input.content, picks the first band it fits and applies its action. It
   * throws only for a spill that the service refused (for example ALREADY_EXISTS for a key that
   * names an attempt already holding other bytes), or that was UNAVAILABLE under `required`
   * preservation (`blob_store_required`), and for a JSON value that JSON cannot write (a BigInt,
   * a cycle: INVALID_ARGUMENT, before anything is stored). Every throw is a ConnectError.
   */
  apply(input: ElisionInput): Promise<ElisionResult>;
}

/**
 * createElisionPolicy validates opts (INVALID_ARGUMENT for no bands, bands out of order, a last
 * band with an upTo, a bad summarize action or truncateBudget, an empty tool pattern or include
 * list) and returns the policy.
 */
export function createElisionPolicy(opts: ElisionPolicyOptions): ElisionPolicy {
  // perTool, include and exclude pick, per tool, one of several policies without them.
  if (hasToolRules(opts)) return createPerToolPolicy(opts, createElisionPolicy);
  validateBands(opts.bands);
  validateTruncateBudget(opts.truncateBudget);
  const measure = opts.measure ?? "chars";
  const fallback: TruncateMode =
    opts.fallback === undefined || opts.fallback === "truncate"
      ? "head+tail"
      : opts.fallback.truncate;
  const budgetUnits = opts.truncateBudget ?? 2000;
  const budgetChars = measure === "tokens" ? budgetUnits * 4 : budgetUnits;
  const measureText = (text: string) => {
    const chars = countChars(text);
    return measure === "tokens" ? Math.ceil(chars / 4) : chars;
  };
  const attempts = createAttemptTracker();

  return {
    async apply(input) {
      const raw =
        typeof input.content === "string"
          ? input.content
          : jsonText(input.content.json, "elision policy");
      // A tool that returned nothing (undefined) has nothing to elide and nothing to store.
      if (raw === undefined) return { kind: "passthrough", text: "", size: 0 };
      // read_tool_output's text is the server's window, already rendered as the model sees it.
      if (input.toolName === readToolOutputToolName) {
        return { kind: "passthrough", text: raw, size: measureText(raw) };
      }
      const text = modelText(raw, opts.keepAnsi);
      const size = measureText(text);
      const band = opts.bands.find((b) => b.upTo === undefined || size <= b.upTo);
      const action = band?.action ?? "spill";
      if (action === "passthrough") return { kind: "passthrough", text, size };
      if (action !== "spill" && !isSummarizeAction(action)) {
        return { kind: "truncated", text: truncateText(text, action.truncate, budgetChars), size };
      }
      const isJson = typeof input.content !== "string";
      const offloadOptions: OffloadOptions = {
        ...(isJson ? { contentType: "application/json" } : {}),
        ...(opts.keepAnsi ? { preview: { keepAnsi: true } } : {}),
        ...input.offload,
      };
      let attachment: ResultAttachment;
      try {
        attachment = await offloadNextAttempt(
          input.client,
          input.key,
          typeof input.content === "string" ? input.content : { json: input.content.json },
          attempts,
          offloadOptions,
          input.call,
        );
      } catch (err) {
        if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) throw err;
        if (opts.preservation === "required") {
          throw new ConnectError(
            `blob_store_required: the result of call "${input.key.callId}" must be stored, but Spillway is unavailable: ${err.rawMessage}`,
            Code.Unavailable,
            undefined,
            undefined,
            err,
          );
        }
        const cut = truncateText(text, fallback, budgetChars);
        const note = "[full output not stored: the output store is unavailable; no handle to read]";
        return { kind: "preview_only", text: `${cut}\n${note}`, size };
      }
      const preview = attachment.preview?.text ?? "";
      const spilled: ElisionResult = { kind: "spilled", text: preview, attachment, size };
      if (action === "spill") return spilled;
      // The output is stored before the summarizer runs, so whatever it does nothing is lost.
      const tool = input.toolName ?? "";
      const outcome = await runSummarizer(
        action,
        tool,
        text,
        attachment.handle,
        input.call?.signal,
      );
      if ("failure" in outcome) return { ...spilled, summaryFailure: outcome.failure };
      const shown = summarizedText(attachment, input.toolName, outcome.summary);
      return { kind: "summarized", text: shown, attachment, size };
    },
  };
}

function validateBands(bands: readonly ElisionBand[]): void {
  const last = bands[bands.length - 1];
  if (last === undefined) {
    throw new ConnectError("elision policy: bands must not be empty", Code.InvalidArgument);
  }
  if (last.upTo !== undefined) {
    throw new ConnectError(
      "elision policy: the last band must have no upTo (it catches every larger result)",
      Code.InvalidArgument,
    );
  }
  for (const band of bands)
    if (isSummarizeAction(band.action)) validateSummarizeAction(band.action);
  let previous = -1;
  for (const band of bands.slice(0, -1)) {
    if (band.upTo === undefined || !(band.upTo > previous)) {
      throw new ConnectError(
        "elision policy: every band but the last needs an upTo larger than the one before",
        Code.InvalidArgument,
      );
    }
    previous = band.upTo;
  }
}

function validateTruncateBudget(budget: number | undefined): void {
  if (budget !== undefined && !(Number.isFinite(budget) && budget >= 0)) {
    throw new ConnectError(
      "elision policy: truncateBudget must be a non-negative number",
      Code.InvalidArgument,
    );
  }
}
