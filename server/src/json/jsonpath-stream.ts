import { Code, ConnectError } from "@connectrpc/connect";
import type { JsonEvents, JsonScalarKind } from "./json-events.js";
import { decodeJsonString } from "./json-string.js";
import {
  createJsonValueBuilder,
  type JsonProjection,
  type JsonSpan,
  type JsonValueBuilder,
} from "./json-value-builder.js";
import type {
  Comparable,
  FunctionArgument,
  FunctionCall,
  JsonPathQuery,
  JsonPathSelector,
  LogicalExpr,
} from "./jsonpath-ast.js";
import {
  evaluateJsonPath,
  type JsonPathBudget,
  normalPathStep,
  type PathStep,
  testFilter,
  withJsonPathBudget,
} from "./jsonpath-eval.js";
import { isSingularQuery } from "./jsonpath-parse.js";

/** StreamedNode is a node the query matched: its normalized path and where its value lies. */
export interface StreamedNode {
  /** Normalized path (RFC 9535 section 2.7). */
  readonly path: string;
  /** Offset of the value's first byte. */
  readonly offset: number;
  /** Bytes the value spans; -1 while the value is still streaming in. */
  length: number;
}

/** JsonPathStreamOptions select the matches a stream keeps and bound its buffering. */
export interface JsonPathStreamOptions {
  /** Matches to count but not keep before the first kept one. */
  readonly skip: number;
  /** Matches to keep after the skipped ones. */
  readonly limit: number;
  /** Most payload bytes one buffered value may span (see jsonPathBuffering). */
  readonly maxBufferBytes: number;
  /**
   * The work in-memory evaluation of held values may do (JsonPathBudget): each evaluation at
   * most jsonPathEvaluationSteps plus twice the held value's bytes, all of them at most what
   * the budget holds. Unset: unbounded.
   */
  readonly budget?: JsonPathBudget;
  /** The payload is JSON Lines: its records are queried as the elements of one array. */
  readonly lines: boolean;
}

/** JsonPathStream evaluates a query over JsonEvents, keeping only a window of its matches. */
export interface JsonPathStream {
  /** The events to drive it with (a tokenizer's consumer). */
  readonly events: JsonEvents;
  /** Kept matches, in document order. */
  readonly nodes: readonly StreamedNode[];
  /** Matches found so far (skipped, kept and beyond the window). */
  readonly total: number;
  /** True once `limit` matches are kept and complete: reading further only counts. */
  readonly satisfied: boolean;
  /** Ends the text of `size` bytes (closes the records' array of JSON Lines). */
  finish(size: number): void;
}

/** A node's place: its parent's and its own step; the normalized path is built when asked. */
interface PathLink {
  readonly parent: PathLink | undefined;
  readonly step: PathStep;
  text: string | undefined;
}

/** The normalized path of a link, built once (most nodes a query visits never need it). */
function pathText(link: PathLink): string {
  link.text ??= link.parent === undefined ? "$" : pathText(link.parent) + normalPathStep(link.step);
  return link.text;
}

/** An open container the query may still select from. */
interface Frame {
  readonly array: boolean;
  /** Segments this node is an input to (indices into the query's segments). */
  readonly states: readonly number[];
  readonly path: PathLink;
  index: number;
  key: string | undefined;
  /** The kept match this node is, to complete at its close. */
  readonly slot: StreamedNode | undefined;
}

/** A child being entered: what the query makes of it before its value is seen. */
interface Entry {
  readonly path: PathLink;
  /** States known from names, indices, slices, wildcards and descendant segments. */
  readonly states: number[];
  /** Segment indices whose filter, if it holds on the node, makes it an input to index + 1. */
  readonly pending: { readonly segment: number; readonly expr: LogicalExpr }[];
}

/** True when a selector can only be decided knowing the array's length. */
function needsLength(selector: JsonPathSelector): boolean {
  if (selector.kind === "index") return selector.index < 0;
  if (selector.kind === "slice") {
    return (selector.step ?? 1) < 0 || (selector.start ?? 0) < 0 || (selector.end ?? 0) < 0;
  }
  return false;
}

/** jsonPathEvaluationSteps is the work any one evaluation may do beside twice its value's bytes. */
export const jsonPathEvaluationSteps = 4_000_000;

/** True when an expression holds an absolute (`$`) query, at any depth. */
function usesRoot(expr: LogicalExpr): boolean {
  const inQuery = (q: JsonPathQuery): boolean =>
    q.root === "$" ||
    q.segments.some((s) => s.selectors.some((sel) => sel.kind === "filter" && usesRoot(sel.expr)));
  const inCall = (args: readonly FunctionArgument[]): boolean =>
    args.some((a) =>
      a.kind === "query"
        ? inQuery(a.query)
        : a.kind === "logical"
          ? usesRoot(a.expr)
          : a.kind === "call"
            ? inCall(a.call.args)
            : false,
    );
  switch (expr.kind) {
    case "or":
    case "and":
      return expr.operands.some(usesRoot);
    case "not":
      return usesRoot(expr.operand);
    case "exists":
      return inQuery(expr.query);
    case "test":
      return inCall(expr.call.args);
    case "compare":
      return [expr.left, expr.right].some((c) =>
        c.kind === "singular" ? inQuery(c.query) : c.kind === "call" ? inCall(c.call.args) : false,
      );
  }
}

/**
 * jsonPathBuffering says what a query must hold in memory while streaming: `root` when a
 * filter compares with an absolute query (`$` inside a filter: the whole document), else
 * whether filters buffer each candidate child (`filterChildren`) and whether negative indices
 * or slices with negative bounds or steps buffer the array they select from (`arrays`).
 */
export function jsonPathBuffering(query: JsonPathQuery): {
  readonly root: boolean;
  readonly filterChildren: boolean;
  readonly arrays: boolean;
} {
  const selectors = query.segments.flatMap((s) => s.selectors);
  return {
    root: selectors.some((s) => s.kind === "filter" && usesRoot(s.expr)),
    filterChildren: selectors.some((s) => s.kind === "filter"),
    arrays: selectors.some(needsLength),
  };
}

/** Paths below a node whose whole values a consumer reads; null when it may read anything. */
type Paths = PathStep[][] | null;

/** The steps of a relative singular query with non-negative indices, or null. */
function relativeSteps(query: JsonPathQuery): PathStep[] | null {
  if (query.root !== "@" || !isSingularQuery(query)) return null;
  const steps: PathStep[] = [];
  for (const segment of query.segments) {
    const selector = segment.selectors[0];
    if (selector?.kind === "name") steps.push(selector.name);
    else if (selector?.kind === "index" && selector.index >= 0) steps.push(selector.index);
    else return null;
  }
  return steps;
}

function joinPaths(parts: readonly Paths[]): Paths {
  const out: PathStep[][] = [];
  for (const part of parts) {
    if (part === null) return null;
    out.push(...part);
  }
  return out;
}

/** The paths below the current node a function's arguments read, or null. */
function callPaths(call: FunctionCall): Paths {
  return joinPaths(call.args.map(argumentPaths));
}

function argumentPaths(arg: FunctionArgument): Paths {
  if (arg.kind === "literal") return [];
  if (arg.kind === "logical") return filterPaths(arg.expr);
  if (arg.kind === "call") return callPaths(arg.call);
  const steps = relativeSteps(arg.query);
  return steps === null ? null : [steps];
}

function comparablePaths(comparable: Comparable): Paths {
  if (comparable.kind === "literal") return [];
  if (comparable.kind === "call") return callPaths(comparable.call);
  const steps = relativeSteps(comparable.query);
  return steps === null ? null : [steps];
}

/** The paths below the current node a filter reads, or null when it may read anything. */
function filterPaths(expr: LogicalExpr): Paths {
  switch (expr.kind) {
    case "or":
    case "and":
      return joinPaths(expr.operands.map(filterPaths));
    case "not":
      return filterPaths(expr.operand);
    case "exists": {
      const steps = relativeSteps(expr.query);
      return steps === null ? null : [steps];
    }
    case "test":
      return callPaths(expr.call);
    case "compare":
      return joinPaths([comparablePaths(expr.left), comparablePaths(expr.right)]);
  }
}

/** Builds the projection of a list of paths; undefined (everything) when a path is empty. */
function projectionOf(paths: readonly PathStep[][]): JsonProjection | undefined {
  const root: JsonProjection = { whole: false, kids: new Map() };
  for (const path of paths) {
    if (path.length === 0) return undefined;
    let at = root;
    for (const step of path) {
      let next = at.kids.get(step);
      if (next === undefined) {
        next = { whole: false, kids: new Map() };
        at.kids.set(step, next);
      }
      at = next;
    }
    at.whole = true;
  }
  return root;
}

/** Shared empty lists for entries with no states or no pending filters (never written). */
const noStates: number[] = [];
const noPending: { readonly segment: number; readonly expr: LogicalExpr }[] = [];

/** Adds `state` to a child's states (created on first use) unless it is there. */
function addState(states: number[] | undefined, state: number): number[] {
  if (states === undefined) return [state];
  if (!states.includes(state)) states.push(state);
  return states;
}

/** The segment a pending filter belongs to. */
const segmentOf = (pending: Entry["pending"][number]): number => pending.segment;

/** True when two short lists of numbers are equal. */
function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** True when `segments` are the segments of `pending`, in order. */
function sameSegments(segments: readonly number[], pending: Entry["pending"]): boolean {
  if (segments.length !== pending.length) return false;
  for (let i = 0; i < segments.length; i++) if (segments[i] !== pending[i]?.segment) return false;
  return true;
}

/** Walks a span tree along a relative path. */
function spanAt(span: JsonSpan, path: readonly PathStep[]): JsonSpan {
  let at = span;
  for (const step of path) {
    const kids = at.kids;
    const next = Array.isArray(kids)
      ? kids[step as number]
      : kids !== undefined && typeof step === "string" && Object.hasOwn(kids, step)
        ? kids[step]
        : undefined;
    if (next === undefined) break;
    at = next;
  }
  return at;
}

/**
 * createJsonPathStream evaluates `query` over the events of one JSON text (or the records of
 * JSON Lines, as one array) without holding the text.
 *
 * Guarantees: it reports each matched node once, in document order, with its normalized path
 * and byte range (a node that several selectors reach is one node). Names, wildcards,
 * non-negative indices, forward slices with non-negative bounds and descendant segments are
 * decided as the events pass, holding only the path to the current node; a filter holds each
 * candidate child (its current node) whole while deciding it, a negative index or slice holds
 * the array it selects from, and a filter with an absolute query holds the whole document;
 * each such value is bounded by maxBufferBytes (RESOURCE_EXHAUSTED beyond it). Matches before
 * `skip` and after `skip + limit` are only counted.
 */
export function createJsonPathStream(
  query: JsonPathQuery,
  options: JsonPathStreamOptions,
): JsonPathStream {
  const segments = query.segments;
  const last = segments.length;
  const lengthSegments = segments.map((s) => s.selectors.some(needsLength));
  // What a filter selector leaves pending on each child it tests (one object per selector).
  const pendingFilters = new Map<JsonPathSelector, Entry["pending"][number]>();
  segments.forEach((segment, index) => {
    for (const selector of segment.selectors) {
      if (selector.kind === "filter") {
        pendingFilters.set(selector, { segment: index, expr: selector.expr });
      }
    }
  });
  const buffering = jsonPathBuffering(query);
  /** Runs one in-memory evaluation of a value spanning `bytes`, within the budget. */
  const bounded = <T>(bytes: number, work: () => T): T =>
    options.budget === undefined
      ? work()
      : withJsonPathBudget(options.budget, jsonPathEvaluationSteps + 2 * bytes, work);
  const nodes: StreamedNode[] = [];
  const stack: Frame[] = [];
  let total = 0;
  // Depth inside a container the query cannot select from.
  let skipDepth = 0;
  // A scalar arriving in pieces: its entry (undefined when nothing selects it).
  let scalar:
    | {
        entry: Entry | undefined;
        builder: JsonValueBuilder | undefined;
        slot: StreamedNode | undefined;
        matched: boolean;
      }
    | undefined;
  // One builder for held containers and one for tested scalars, each reset per value: one
  // value of each is built at a time, and they are never built at once.
  let heldBuilder: JsonValueBuilder | undefined;
  let scalarBuilder: JsonValueBuilder | undefined;
  const scalarBuilderFor = (entry: Entry): JsonValueBuilder => {
    const why = () => `a filter tests ${pathText(entry.path)} whole`;
    if (scalarBuilder === undefined) {
      scalarBuilder = createJsonValueBuilder(options.maxBufferBytes, why);
    } else scalarBuilder.reset(why);
    return scalarBuilder;
  };
  // Inside a string arriving in pieces that the query neither selects nor tests.
  let quietScalar = false;
  // A value held whole.
  let buffered: { entry: Entry; builder: JsonValueBuilder } | undefined;

  /** Counts a match; keeps it when in the window. */
  const record = (path: () => string, offset: number, length: number): StreamedNode | undefined => {
    const ordinal = total++;
    if (ordinal < options.skip || ordinal >= options.skip + options.limit) return undefined;
    const node: StreamedNode = { path: path(), offset, length };
    nodes.push(node);
    return node;
  };

  /** What the query makes of the next child of the innermost frame (or of the root). */
  const enter = (): Entry | undefined => {
    const parent = stack[stack.length - 1];
    if (parent === undefined) {
      return { path: { parent: undefined, step: "", text: "$" }, states: [0], pending: [] };
    }
    let step: PathStep;
    if (parent.array) step = parent.index++;
    else step = parent.key ?? "";
    // Built lazily: most children of a descendant segment's nodes just inherit its state.
    let states: number[] | undefined;
    let pending: Entry["pending"][number][] | undefined;
    let inherited = true;
    const parentStates = parent.states;
    for (let k = 0; k < parentStates.length; k++) {
      const state = parentStates[k] as number;
      const segment = segments[state];
      if (segment === undefined) continue;
      if (segment.kind === "descendant") states = addState(states, state);
      else inherited = false;
      for (const selector of segment.selectors) {
        switch (selector.kind) {
          case "name":
            if (step === selector.name) {
              states = addState(states, state + 1);
              inherited = false;
            }
            break;
          case "wildcard":
            states = addState(states, state + 1);
            inherited = false;
            break;
          case "index":
            if (step === selector.index) {
              states = addState(states, state + 1);
              inherited = false;
            }
            break;
          case "slice": {
            if (typeof step !== "number" || needsLength(selector)) break;
            const from = selector.start ?? 0;
            const step_ = selector.step ?? 1;
            if (step_ > 0 && step >= from && (selector.end === undefined || step < selector.end)) {
              if ((step - from) % step_ === 0) {
                states = addState(states, state + 1);
                inherited = false;
              }
            }
            break;
          }
          case "filter":
            pending ??= [];
            pending.push(pendingFilters.get(selector) as Entry["pending"][number]);
            break;
        }
      }
    }
    if (states === undefined && pending === undefined) return undefined;
    return {
      path: { parent: parent.path, step, text: undefined },
      // The same states as the parent's (descendant segments only, nothing selected): share them.
      states: inherited && states !== undefined ? (parentStates as number[]) : (states ?? noStates),
      pending: pending ?? noPending,
    };
  };

  /** True when a container entered as `entry` must be held whole. */
  const mustBuffer = (entry: Entry, array: boolean): boolean =>
    entry.pending.length > 0 ||
    (array && entry.states.some((s) => lengthSegments[s] === true)) ||
    (buffering.root && stack.length === 0);

  /**
   * Paths a node that is an input to segment `state` needs for the rest of the query, when the
   * rest only names members and elements (each a single name or non-negative index).
   */
  const restPaths = (state: number): Paths => {
    const steps: PathStep[] = [];
    for (const segment of segments.slice(state)) {
      const selector = segment.selectors[0];
      if (segment.kind !== "child" || segment.selectors.length !== 1) return null;
      if (selector?.kind === "name") steps.push(selector.name);
      else if (selector?.kind === "index" && selector.index >= 0) steps.push(selector.index);
      else return null;
    }
    return state === last ? [] : [steps];
  };
  const filterPathsOf = new Map<number, Paths>();
  const projections = new Map<string, JsonProjection | undefined>();
  let lastProjection:
    | {
        readonly states: readonly number[];
        readonly pending: readonly number[];
        readonly projection: JsonProjection | undefined;
      }
    | undefined;
  /** What of a held node the query reads: only its filters' and the rest's paths when known. */
  const projectionFor = (entry: Entry): JsonProjection | undefined => {
    if (buffering.root && stack.length === 0) return undefined;
    // Consecutive held nodes (a filter's candidates) nearly always share their states.
    if (
      lastProjection !== undefined &&
      sameNumbers(lastProjection.states, entry.states) &&
      sameSegments(lastProjection.pending, entry.pending)
    ) {
      return lastProjection.projection;
    }
    const key = `${entry.states.join(",")}|${entry.pending.map(segmentOf).join(",")}`;
    const projection = projections.has(key) ? projections.get(key) : buildProjection(entry);
    projections.set(key, projection);
    lastProjection = {
      states: entry.states,
      pending: entry.pending.map(segmentOf),
      projection,
    };
    return projection;
  };
  const buildProjection = (entry: Entry): JsonProjection | undefined => {
    const parts: Paths[] = [];
    for (const p of entry.pending) {
      if (!filterPathsOf.has(p.segment)) {
        const segment = segments[p.segment];
        filterPathsOf.set(
          p.segment,
          joinPaths(
            (segment?.selectors ?? []).map((sel) =>
              sel.kind === "filter" ? filterPaths(sel.expr) : [],
            ),
          ),
        );
      }
      parts.push(filterPathsOf.get(p.segment) ?? null, restPaths(p.segment + 1));
    }
    for (const state of entry.states) parts.push(restPaths(state));
    const paths = joinPaths(parts);
    return paths === null ? undefined : projectionOf(paths);
  };

  const startBuffer = (entry: Entry): JsonValueBuilder => {
    const root = buffering.root && stack.length === 0;
    const why = () =>
      root
        ? "a filter compares with an absolute $ query, so the whole document is held"
        : entry.pending.length > 0
          ? `a filter tests ${pathText(entry.path)} whole`
          : `a negative index or slice needs the length of ${pathText(entry.path)}`;
    const projection = projectionFor(entry);
    if (heldBuilder === undefined) {
      heldBuilder = createJsonValueBuilder(options.maxBufferBytes, why, projection);
    } else heldBuilder.reset(why, projection);
    buffered = { entry, builder: heldBuilder };
    return heldBuilder;
  };

  /** Decides a held value: its own match and every match inside it, in document order. */
  const finishBuffer = (): void => {
    if (buffered === undefined) return;
    const { entry, builder } = buffered;
    buffered = undefined;
    const value = builder.value;
    const heldBytes = builder.span.end - builder.span.start;
    const states = [...entry.states];
    for (const p of entry.pending) {
      if (
        !states.includes(p.segment + 1) &&
        bounded(heldBytes, () => testFilter(p.expr, value, value))
      ) {
        states.push(p.segment + 1);
      }
    }
    if (states.length === 0) return;
    // By relative path: each node once (JSON Lines' records' array starts where its first
    // record does, so offsets alone do not tell nodes apart).
    const found = new Map<string, JsonSpan>();
    for (const state of states) {
      if (state === last) {
        found.set("", builder.span);
        continue;
      }
      const selected = bounded(heldBytes, () =>
        evaluateJsonPath(query, value, value, { value, path: [] }, state),
      );
      for (const node of selected) {
        const relative = node.path.map(normalPathStep).join("");
        if (!found.has(relative)) found.set(relative, spanAt(builder.span, node.path));
      }
    }
    const ordered = [...found].sort((a, b) => a[1].start - b[1].start || b[1].end - a[1].end);
    for (const [relative, span] of ordered) {
      record(() => pathText(entry.path) + relative, span.start, span.end - span.start);
    }
  };

  const open = (array: boolean, offset: number): void => {
    if (buffered !== undefined) {
      if (array) buffered.builder.openArray(offset);
      else buffered.builder.openObject(offset);
      return;
    }
    if (skipDepth > 0) {
      skipDepth++;
      return;
    }
    const entry = enter();
    if (entry === undefined) {
      skipDepth = 1;
      return;
    }
    if (mustBuffer(entry, array)) {
      const builder = startBuffer(entry);
      if (array) builder.openArray(offset);
      else builder.openObject(offset);
      return;
    }
    const matched = entry.states.includes(last);
    const slot = matched ? record(() => pathText(entry.path), offset, -1) : undefined;
    stack.push({
      array,
      states: matched ? entry.states.filter((s) => s < last) : entry.states,
      path: entry.path,
      index: 0,
      key: undefined,
      slot,
    });
  };

  const close = (array: boolean, offset: number): void => {
    if (buffered !== undefined) {
      if (array) buffered.builder.closeArray(offset);
      else buffered.builder.closeObject(offset);
      if (buffered.builder.done) finishBuffer();
      return;
    }
    if (skipDepth > 0) {
      skipDepth--;
      return;
    }
    const frame = stack.pop();
    if (frame?.slot !== undefined) frame.slot.length = offset + 1 - frame.slot.offset;
  };

  const events: JsonEvents = {
    openObject: (offset) => open(false, offset),
    openArray: (offset) => open(true, offset),
    closeObject: (offset) => close(false, offset),
    closeArray: (offset) => close(true, offset),
    key(raw, offset) {
      if (buffered !== undefined) {
        buffered.builder.key(raw, offset);
        return;
      }
      if (skipDepth > 0) return;
      const top = stack[stack.length - 1];
      if (top !== undefined) top.key = decodeJsonString(raw);
    },
    scalar(kind: JsonScalarKind, raw, offset, isLast) {
      if (buffered !== undefined) {
        buffered.builder.scalar(kind, raw, offset, isLast);
        if (buffered.builder.done) finishBuffer();
        return;
      }
      if (skipDepth > 0) return;
      if (quietScalar) {
        // The rest of a string the query neither selects nor tests.
        quietScalar = !isLast;
        return;
      }
      if (scalar === undefined) {
        const entry = enter();
        const matched = entry?.states.includes(last) === true;
        // A scalar has no children: only a filter that makes it an input to the last
        // segment can select it.
        const tested = entry?.pending.some((p) => p.segment + 1 === last) === true;
        if (!matched && !tested) {
          // Most scalars of a scan: nothing to keep about them.
          quietScalar = !isLast;
          return;
        }
        scalar = {
          entry,
          builder: entry !== undefined && tested ? scalarBuilderFor(entry) : undefined,
          slot:
            matched && entry !== undefined
              ? record(() => pathText(entry.path), offset, -1)
              : undefined,
          matched,
        };
      }
      const current = scalar;
      current.builder?.scalar(kind, raw, offset, isLast);
      if (!isLast) return;
      scalar = undefined;
      const end = offset + raw.length;
      if (current.slot !== undefined) current.slot.length = end - current.slot.offset;
      const { entry, builder } = current;
      if (entry === undefined || builder === undefined || current.matched) return;
      const value = builder.value;
      const tested = (p: Entry["pending"][number]) =>
        p.segment + 1 === last &&
        bounded(end - builder.span.start, () => testFilter(p.expr, value, value));
      if (entry.pending.some(tested)) {
        const start = builder.span.start;
        record(() => pathText(entry.path), start, end - start);
      }
    },
  };

  if (options.lines) events.openArray(0);

  return {
    events,
    nodes,
    get total() {
      return total;
    },
    get satisfied() {
      return nodes.length >= options.limit && nodes.every((n) => n.length >= 0);
    },
    finish(size) {
      if (options.lines) events.closeArray(Math.max(0, size - 1));
      if (stack.length > 0 || buffered !== undefined) {
        throw new ConnectError("JSONPath stream ended inside a value", Code.Internal);
      }
    },
  };
}
