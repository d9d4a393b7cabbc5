import { Code, ConnectError } from "@connectrpc/connect";
import type { ResultAttachment } from "@spillway/proto/spillway/v1/types_pb.js";
import { countChars } from "./truncate-text.js";

/**
 * Summarizer turns a tool's full output into the summary the model sees (typically a call to
 * your model). It has pydantic-ai-harness's `summarize(tool_name, text)` shape; `signal` aborts
 * when the summary is no longer wanted (its time is up), and `handle` names the stored output.
 */
export type Summarizer = (
  toolName: string,
  text: string,
  opts: { readonly signal: AbortSignal; readonly handle: string },
) => Promise<string> | string;

/**
 * SummarizeAction spills the full output and shows the model a summary with the handle, so
 * nothing is lost. A summarizer that throws, runs past timeoutMs, or answers with something
 * other than a non-empty string of at most maxChars characters is ignored: the model sees the
 * plain spilled view instead and the result says why (`summaryFailure`).
 */
export interface SummarizeAction {
  /** Produces the summary from the tool name and the full text. */
  readonly summarize: Summarizer;
  /** Longest summary shown, in characters (code points); default 4000. */
  readonly maxChars?: number;
  /** How long the summarizer may take, in milliseconds; default 60000. */
  readonly timeoutMs?: number;
}

/** Why a summary was not shown. */
export type SummaryFailureReason = "threw" | "timeout" | "too_long" | "empty" | "not_text";

/** SummaryFailure says why the model was shown the spilled view instead of a summary. */
export interface SummaryFailure {
  /** `threw`, `timeout`, `too_long` (over maxChars), `empty` (only whitespace), `not_text`. */
  readonly reason: SummaryFailureReason;
  /** A one-line account, for logs. */
  readonly message: string;
}

/** The defaults of a SummarizeAction. */
export const summarizeDefaults = { maxChars: 4000, timeoutMs: 60_000 } as const;

/** isSummarizeAction says whether an elision action is a SummarizeAction. */
export function isSummarizeAction(action: unknown): action is SummarizeAction {
  return typeof action === "object" && action !== null && "summarize" in action;
}

/**
 * validateSummarizeAction throws INVALID_ARGUMENT unless summarize is a function and maxChars
 * and timeoutMs, when given, are positive integers.
 */
export function validateSummarizeAction(action: SummarizeAction): void {
  if (typeof action.summarize !== "function") {
    throw new ConnectError("elision policy: summarize must be a function", Code.InvalidArgument);
  }
  for (const [field, value] of [
    ["maxChars", action.maxChars],
    ["timeoutMs", action.timeoutMs],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value > 0)) {
      throw new ConnectError(
        `elision policy: summarize ${field} must be a positive integer`,
        Code.InvalidArgument,
      );
    }
  }
}

/**
 * runSummarizer calls the summarizer once, bounded by the action's timeout and the caller's
 * signal, and returns the summary or why there is none. It never throws: whatever the
 * summarizer does, the caller gets an answer within timeoutMs.
 */
export async function runSummarizer(
  action: SummarizeAction,
  toolName: string,
  text: string,
  handle: string,
  signal?: AbortSignal,
): Promise<{ readonly summary: string } | { readonly failure: SummaryFailure }> {
  const maxChars = action.maxChars ?? summarizeDefaults.maxChars;
  const timeoutMs = action.timeoutMs ?? summarizeDefaults.timeoutMs;
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<"timeout" | "cancelled">((resolve) => {
    timer = setTimeout(() => {
      resolve("timeout");
      controller.abort(new Error("summarizer timed out"));
    }, timeoutMs);
    controller.signal.addEventListener("abort", () => resolve("cancelled"), { once: true });
  });
  try {
    const outcome = await Promise.race([
      Promise.resolve()
        .then(() => action.summarize(toolName, text, { signal: controller.signal, handle }))
        .then(
          (value) => ({ value }),
          (err: unknown) => ({ err }),
        ),
      expired,
    ]);
    if (outcome === "timeout") return fail("timeout", `no summary within ${timeoutMs} ms`);
    if (outcome === "cancelled")
      return fail("timeout", "the call was cancelled before the summary");
    if ("err" in outcome) {
      return fail("threw", `the summarizer threw: ${describe(outcome.err)}`);
    }
    const summary: unknown = outcome.value;
    if (typeof summary !== "string") {
      return fail("not_text", `the summarizer returned ${typeof summary}, not a string`);
    }
    if (/^[ \t\r\n]*$/.test(summary)) return fail("empty", "the summarizer returned no text");
    const chars = countChars(summary);
    if (chars > maxChars) {
      return fail("too_long", `the summary has ${chars} chars, over the ${maxChars}-char limit`);
    }
    return { summary };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * summarizedText is what the model sees for a summarized output: a header in the form of the
 * server's preview (handle, stored size, whose output), the summary, and how to read the
 * stored output, which is whole.
 */
export function summarizedText(
  attachment: ResultAttachment,
  toolName: string | undefined,
  summary: string,
): string {
  const of = toolName === undefined || toolName === "" ? "the output" : `the "${toolName}" output`;
  const h = attachment.handle;
  const lines = attachment.lineCount === 1n ? "1 line" : `${attachment.lineCount} lines`;
  return (
    `[${h}] ${attachment.sizeBytes} bytes · ${lines} · summary of ${of}\n${summary}\n` +
    `[full output stored: read_tool_output(handle="${h}", offset=0)]`
  );
}

function fail(reason: SummaryFailureReason, message: string): { failure: SummaryFailure } {
  return { failure: { reason, message } };
}

function describe(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const line = text.split("\n", 1)[0] ?? "";
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
