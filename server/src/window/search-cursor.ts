import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { WindowSource } from "./source.js";

/** SearchCursor is a line a search resumes at: where it starts, its number, matches before it. */
export interface SearchCursor {
  /** Byte offset where the line starts. */
  readonly offset: number;
  /** 0-based line number. */
  readonly line: number;
  /** Lines before it that match the pattern. */
  readonly matchesBefore: number;
  /** searchCursorCheck of the payload and search it was issued for; "" ties it to none. */
  readonly check?: string;
}

/** What a search cursor is tied to: the payload and the search that issued it. */
export interface SearchIdentity {
  readonly pattern: string;
  readonly regex: boolean;
  readonly ignoreCase: boolean;
  /** Set when the search matches lines with their escape sequences kept. */
  readonly keepAnsi?: boolean;
}

/**
 * searchCursorCheck is the check a cursor carries: a digest of the payload's identity (its
 * sha256, "" for a source without one) and the search, so a cursor kept past a handle's reuse
 * or moved to another search is told apart. It tells cursors apart; it does not hide them.
 */
export function searchCursorCheck(payloadId: string | undefined, search: SearchIdentity): string {
  return createHash("sha256")
    .update(
      JSON.stringify([
        payloadId ?? "",
        search.pattern,
        search.regex,
        search.ignoreCase,
        // Only a search that keeps sequences matches differently; default cursors stay as they were.
        ...(search.keepAnsi === true ? ["keep_ansi"] : []),
      ]),
    )
    .digest()
    .subarray(0, 12)
    .toString("base64url");
}

/**
 * checkCursorTie refuses (INVALID_ARGUMENT `search.after: issued for another …`) a cursor
 * whose check is set and is not `expected`; a cursor without a check passes.
 */
export function checkCursorTie(cursor: SearchCursor | undefined, expected: string): void {
  if (cursor?.check === undefined || cursor.check === "" || cursor.check === expected) return;
  throw badCursor(
    "issued for another payload or search (the handle's output changed, or the pattern, regex, ignore_case or keep_ansi differ); page again without it",
  );
}

/** SearchStart is where a search reads from and which lines it tests. */
export interface SearchStart {
  /** Byte offset the scan reads from: the start of line `firstLine`. */
  readonly offset: number;
  /** 0-based number of the first line read. */
  readonly firstLine: number;
  /** Lines before this one are read only as context for later matches, never tested. */
  readonly testFrom: number;
  /** Matching lines before testFrom. */
  readonly matchesBefore: number;
}

/** searchFromStart is where a search without a cursor starts: line 0, nothing before it. */
const searchFromStart: SearchStart = Object.freeze({
  offset: 0,
  firstLine: 0,
  testFrom: 0,
  matchesBefore: 0,
});

/** First block read backwards for context lines; blocks double up to maxBlockBytes. */
const firstBlockBytes = 16 * 1024;
const maxBlockBytes = 1024 * 1024;
const newline = 10;

/** Reads [start, end) of the payload into one buffer, handing the source's chunks back. */
async function readRange(
  source: WindowSource,
  start: number,
  end: number,
  signal: AbortSignal | undefined,
): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of await source.read(start, end - start, signal)) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  for (const chunk of chunks) source.release(chunk);
  return bytes;
}

/** The INVALID_ARGUMENT a cursor that does not fit the payload gets. */
function badCursor(reason: string): ConnectError {
  return new ConnectError(`search.after: ${reason}`, Code.InvalidArgument);
}

/**
 * resolveSearchStart checks a cursor against the payload and returns where a search resumed
 * from it reads, with up to `contextLines` lines before the cursor's line read again as
 * context for the matches right after it (found by reading backwards from the cursor, in
 * blocks, so the cost is those lines' bytes, not the payload's).
 *
 * Guarantees: it reads nothing outside [0, size); a cursor at the payload's end (numbered as
 * the line after the last) is the end (the window is empty); a cursor past the end, one whose
 * offset does not start a line, whose line number
 * is beyond the payload's lines or contradicts the lines found before it, that counts more
 * matches than lines, or that stands for more matches than `skip` is INVALID_ARGUMENT.
 */
export async function resolveSearchStart(
  source: WindowSource,
  cursor: SearchCursor | undefined,
  skip: number,
  contextLines: number,
  signal?: AbortSignal,
): Promise<SearchStart> {
  if (cursor === undefined) return searchFromStart;
  const { offset, line, matchesBefore } = cursor;
  if (matchesBefore > skip) {
    throw badCursor(
      `skip (${skip}) must be at least the cursor's matches_before (${matchesBefore})`,
    );
  }
  if (matchesBefore > line) {
    throw badCursor(`matches_before (${matchesBefore}) exceeds the lines before it (${line})`);
  }
  if (line > source.lineCount) {
    throw badCursor(`line ${line} is beyond the payload's ${source.lineCount} lines`);
  }
  if (offset === 0 && line !== 0) throw badCursor(`byte 0 starts line 0, not line ${line}`);
  if (offset > source.size) {
    throw badCursor(`byte ${offset} is past the payload's end (${source.size} bytes)`);
  }
  if (offset === source.size) {
    if (line !== source.lineCount) {
      throw badCursor(
        `the payload's end (byte ${offset}) is line ${source.lineCount}, not ${line}`,
      );
    }
    return { offset, firstLine: line, testFrom: line, matchesBefore };
  }
  if (offset === 0) return searchFromStart;
  if (line === 0) throw badCursor(`line 0 starts at byte 0, not ${offset}`);
  // Walk back from the `\n` ending the line before the cursor's, counting line starts.
  let end = offset;
  let block = firstBlockBytes;
  let found = 0;
  let checked = false;
  while (end > 0) {
    if (signal?.aborted) throw new ConnectError("window read was cancelled", Code.Canceled);
    // Without context only the byte before the cursor is needed.
    const start = Math.max(0, end - (contextLines === 0 ? 1 : block));
    const bytes = await readRange(source, start, end, signal);
    let at = bytes.length - 1;
    if (!checked) {
      if (bytes[at] !== newline) throw badCursor(`byte ${offset} does not start a line`);
      checked = true;
      at--;
    }
    while (found < contextLines && at >= 0) {
      const nl = bytes.lastIndexOf(newline, at);
      if (nl < 0) break;
      found++;
      if (found === contextLines) {
        if (line <= found) throw badCursor(`byte ${offset} starts a line after line ${found}`);
        return { offset: start + nl + 1, firstLine: line - found, testFrom: line, matchesBefore };
      }
      at = nl - 1;
    }
    if (found >= contextLines) {
      return { offset, firstLine: line, testFrom: line, matchesBefore };
    }
    end = start;
    block = Math.min(block * 2, maxBlockBytes);
  }
  // The payload's start came first: the cursor's line is exactly the lines found plus one.
  if (line !== found + 1) {
    throw badCursor(`byte ${offset} starts line ${found + 1}, not line ${line}`);
  }
  return { offset: 0, firstLine: 0, testFrom: line, matchesBefore };
}
