import { Code, ConnectError } from "@connectrpc/connect";

/**
 * matchesToolPattern says whether a tool name matches a pattern: `*` matches any run of
 * characters (none included), `?` exactly one, every other character itself (case-sensitive, no
 * escapes). A pattern without `*` or `?` is an exact name. Characters are Unicode code points, as
 * in the Python SDK, so both match the same names.
 */
export function matchesToolPattern(pattern: string, name: string): boolean {
  const p = Array.from(pattern);
  const n = Array.from(name);
  let pi = 0;
  let ni = 0;
  // The last `*` seen and the name position it was tried at: on a mismatch it takes one more.
  let star = -1;
  let starName = 0;
  while (ni < n.length) {
    if (pi < p.length && (p[pi] === "?" || (p[pi] !== "*" && p[pi] === n[ni]))) {
      pi++;
      ni++;
    } else if (pi < p.length && p[pi] === "*") {
      star = pi++;
      starName = ni;
    } else if (star >= 0) {
      pi = star + 1;
      ni = ++starName;
    } else {
      return false;
    }
  }
  while (pi < p.length && p[pi] === "*") pi++;
  return pi === p.length;
}

/**
 * pickToolPattern returns the pattern of patterns that decides for name, or undefined when none
 * matches: the exact name first, then the matching pattern with the most literal characters
 * (neither `*` nor `?`), then the one that sorts first, so the choice never depends on the order
 * the patterns were written in.
 */
export function pickToolPattern(patterns: Iterable<string>, name: string): string | undefined {
  let best: string | undefined;
  let bestLiterals = -1;
  for (const pattern of patterns) {
    if (pattern === name) return pattern;
    if (!matchesToolPattern(pattern, name)) continue;
    const literals = literalCount(pattern);
    if (
      literals > bestLiterals ||
      (literals === bestLiterals && best !== undefined && sortsBefore(pattern, best))
    ) {
      best = pattern;
      bestLiterals = literals;
    }
  }
  return best;
}

/** ToolFilter says which tools an elision policy touches at all. */
export interface ToolFilter {
  /**
   * applies is false for a tool that no include pattern matches (when include is given) or that
   * an exclude pattern matches: exclusion wins. A result without a tool name is matched as "".
   */
  applies(toolName: string | undefined): boolean;
}

/**
 * createToolFilter validates include and exclude (INVALID_ARGUMENT for an empty pattern or an
 * empty include list, which would touch no tool) and returns the filter.
 */
export function createToolFilter(
  include: readonly string[] | undefined,
  exclude: readonly string[] | undefined,
): ToolFilter {
  if (include !== undefined && include.length === 0) {
    throw new ConnectError(
      "elision policy: include must name at least one tool (omit it to include every tool)",
      Code.InvalidArgument,
    );
  }
  for (const pattern of [...(include ?? []), ...(exclude ?? [])]) validateToolPattern(pattern);
  return {
    applies(toolName) {
      const name = toolName ?? "";
      if (exclude?.some((p) => matchesToolPattern(p, name))) return false;
      return include === undefined || include.some((p) => matchesToolPattern(p, name));
    },
  };
}

/** validateToolPattern throws INVALID_ARGUMENT for a pattern that is not a non-empty string. */
export function validateToolPattern(pattern: unknown): void {
  if (typeof pattern !== "string" || pattern === "") {
    throw new ConnectError(
      "elision policy: a tool name pattern must be a non-empty string",
      Code.InvalidArgument,
    );
  }
}

/** sortsBefore orders by code point (as Python compares strings), not by UTF-16 code unit. */
function sortsBefore(a: string, b: string): boolean {
  const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
  const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return (x[i] ?? 0) < (y[i] ?? 0);
  }
  return x.length < y.length;
}

function literalCount(pattern: string): number {
  let count = 0;
  for (const c of pattern) if (c !== "*" && c !== "?") count++;
  return count;
}
