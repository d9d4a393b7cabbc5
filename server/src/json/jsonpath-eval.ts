import { Code, ConnectError } from "@connectrpc/connect";
import { compileIRegexp } from "./iregexp.js";
import type {
  Comparable,
  FunctionArgument,
  FunctionCall,
  JsonPathQuery,
  JsonPathSelector,
  JsonValue,
  LogicalExpr,
} from "./jsonpath-ast.js";
import { isSingularQuery } from "./jsonpath-parse.js";

/** A path step: a member name or an array index. */
export type PathStep = string | number;

/** JsonPathNode is a node a query selected: its value and its location from the root. */
export interface JsonPathNode {
  readonly value: JsonValue;
  readonly path: readonly PathStep[];
}

type JsonObject = { [key: string]: JsonValue };

/**
 * JsonPathBudget bounds the work in-memory evaluation does for one window, across every value
 * it holds: each node a selector or a descendant segment produces costs its path's length plus
 * one (the path is copied), each filter test and equality step one, each string compared,
 * measured or matched its length (a match or search times the pattern's weight). Memory grows
 * with the nodes one evaluation produces and CPU with all of it, so bounds on both sums bound
 * both, whatever the nesting: without them `$..[?@.a==1]` over 1,000 nested arrays built a
 * million paths of a thousand steps and ran the process out of memory.
 */
export interface JsonPathBudget {
  /** Units the window has left; the scan adds to it as it reads (see jsonPathWindow). */
  left: number;
}

/** The window's budget and what the evaluation running now may still spend of it. */
let running: { window: JsonPathBudget; left: number; limit: number } | undefined;

/**
 * withJsonPathBudget runs `work` (synchronous in-memory evaluation: evaluateJsonPath,
 * testFilter) charging the window's budget `b`, and at most `limit` units for this one
 * evaluation; without it evaluation is unbounded (tests, the reference semantics). Throws
 * RESOURCE_EXHAUSTED from `work` once either is spent.
 */
export function withJsonPathBudget<T>(b: JsonPathBudget, limit: number, work: () => T): T {
  const outer = running;
  running = { window: b, left: Math.min(limit, b.left), limit };
  try {
    return work();
  } finally {
    running = outer;
  }
}

/** Charges `units` to the running evaluation and its window. */
function spend(units: number): void {
  if (running === undefined) return;
  running.left -= units;
  running.window.left -= units;
  if (running.left < 0) {
    throw new ConnectError(
      `the query does more work on the values it holds than a window may (nodes selected times their depth, filter tests, characters compared and matched: over ${running.limit} steps for one held value, or more than the window's share for the bytes it read); narrow it, for instance with fewer descendant segments (..) inside filters`,
      Code.ResourceExhausted,
    );
  }
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Normalized-path escapes (RFC 9535 section 2.7.1). */
function escapeName(name: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are escaped
  if (!/['\\\u0000-\u001f]/.test(name)) return name;
  let out = "";
  for (const c of name) {
    const cp = c.codePointAt(0) ?? 0;
    if (c === "\\") out += "\\\\";
    else if (c === "'") out += "\\'";
    else if (c === "\b") out += "\\b";
    else if (c === "\f") out += "\\f";
    else if (c === "\n") out += "\\n";
    else if (c === "\r") out += "\\r";
    else if (c === "\t") out += "\\t";
    else if (cp < 0x20) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += c;
  }
  return out;
}

/** normalPathStep renders one step of a normalized path: `['name']` or `[3]`. */
export function normalPathStep(step: PathStep): string {
  return typeof step === "number" ? `[${step}]` : `['${escapeName(step)}']`;
}

/** normalizedPath renders a path as RFC 9535 section 2.7 says, for example `$['a'][0]`. */
export function normalizedPath(path: readonly PathStep[]): string {
  let out = "$";
  for (const step of path) out += normalPathStep(step);
  return out;
}

/**
 * sliceIndices returns the indices an array slice selects from an array of `length`, in
 * selection order (RFC 9535 section 2.3.4.2.2).
 */
function sliceIndices(
  length: number,
  start: number | undefined,
  end: number | undefined,
  step: number | undefined,
): number[] {
  const s = step ?? 1;
  if (s === 0) return [];
  const normalize = (i: number): number => (i >= 0 ? i : length + i);
  const out: number[] = [];
  if (s > 0) {
    const lower = Math.min(Math.max(normalize(start ?? 0), 0), length);
    const upper = Math.min(Math.max(normalize(end ?? length), 0), length);
    for (let i = lower; i < upper; i += s) out.push(i);
  } else {
    const upper = Math.min(Math.max(normalize(start ?? length - 1), -1), length - 1);
    const lower = Math.min(Math.max(normalize(end ?? -length - 1), -1), length - 1);
    for (let i = upper; lower < i; i += s) out.push(i);
  }
  return out;
}

/** Children a selector selects from `node`, in selection order. */
function select(
  selector: JsonPathSelector,
  node: JsonPathNode,
  root: JsonValue,
  out: JsonPathNode[],
): void {
  const value = node.value;
  const child = (v: JsonValue, step: PathStep): void => {
    spend(node.path.length + 1);
    out.push({ value: v, path: [...node.path, step] });
  };
  switch (selector.kind) {
    case "name":
      if (isObject(value) && Object.hasOwn(value, selector.name)) {
        child(value[selector.name] as JsonValue, selector.name);
      }
      return;
    case "wildcard":
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) child(value[i] as JsonValue, i);
      } else if (isObject(value))
        for (const k of Object.keys(value)) child(value[k] as JsonValue, k);
      return;
    case "index":
      if (Array.isArray(value)) {
        const i = selector.index >= 0 ? selector.index : value.length + selector.index;
        if (i >= 0 && i < value.length) child(value[i] as JsonValue, i);
      }
      return;
    case "slice":
      if (Array.isArray(value)) {
        for (const i of sliceIndices(value.length, selector.start, selector.end, selector.step)) {
          child(value[i] as JsonValue, i);
        }
      }
      return;
    case "filter":
      if (Array.isArray(value)) {
        value.forEach((v, i) => {
          if (testFilter(selector.expr, v, root)) child(v, i);
        });
      } else if (isObject(value)) {
        for (const k of Object.keys(value)) {
          const v = value[k] as JsonValue;
          if (testFilter(selector.expr, v, root)) child(v, k);
        }
      }
      return;
  }
}

/** Appends `node` and its descendants in document order (pre-order). */
function descendants(node: JsonPathNode, out: JsonPathNode[]): void {
  spend(node.path.length + 1);
  out.push(node);
  const value = node.value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      descendants({ value: value[i] as JsonValue, path: [...node.path, i] }, out);
    }
  } else if (isObject(value)) {
    for (const k of Object.keys(value)) {
      descendants({ value: value[k] as JsonValue, path: [...node.path, k] }, out);
    }
  }
}

/**
 * evaluateJsonPath applies a parsed query to a JSON value held in memory and returns the
 * resulting nodelist in RFC 9535 order (duplicates kept). `current` is the filter's `@` for a
 * relative query; `start` is the node a query starts from when not the root (used to
 * evaluate a query's tail on a buffered subtree).
 */
export function evaluateJsonPath(
  query: JsonPathQuery,
  root: JsonValue,
  current: JsonValue = root,
  start?: JsonPathNode,
  fromSegment = 0,
): JsonPathNode[] {
  let nodes: JsonPathNode[] = [start ?? { value: query.root === "$" ? root : current, path: [] }];
  for (const segment of query.segments.slice(fromSegment)) {
    const next: JsonPathNode[] = [];
    for (const node of nodes) {
      const inputs: JsonPathNode[] = [];
      if (segment.kind === "descendant") descendants(node, inputs);
      else inputs.push(node);
      for (const input of inputs) {
        for (const selector of segment.selectors) select(selector, input, root, next);
      }
    }
    nodes = next;
  }
  return nodes;
}

/** True when the filter expression holds with `@` = current. */
export function testFilter(expr: LogicalExpr, current: JsonValue, root: JsonValue): boolean {
  spend(1);
  switch (expr.kind) {
    case "or":
      return expr.operands.some((e) => testFilter(e, current, root));
    case "and":
      return expr.operands.every((e) => testFilter(e, current, root));
    case "not":
      return !testFilter(expr.operand, current, root);
    case "exists":
      if (isSingularQuery(expr.query))
        return singularValue(expr.query, current, root) !== undefined;
      return evaluateJsonPath(expr.query, root, current).length > 0;
    case "test":
      return callFunction(expr.call, current, root) === true;
    case "compare":
      return compare(
        expr.op,
        comparableValue(expr.left, current, root),
        comparableValue(expr.right, current, root),
      );
  }
}

/** A comparable's value; undefined is Nothing. */
function comparableValue(
  comparable: Comparable,
  current: JsonValue,
  root: JsonValue,
): JsonValue | undefined {
  switch (comparable.kind) {
    case "literal":
      return comparable.value;
    case "singular":
      return singularValue(comparable.query, current, root);
    case "call":
      return callFunction(comparable.call, current, root) as JsonValue | undefined;
  }
}

/**
 * The value a singular query (names and indices only) selects, or undefined (Nothing): the
 * same as its one-node nodelist, without building it.
 */
function singularValue(
  query: JsonPathQuery,
  current: JsonValue,
  root: JsonValue,
): JsonValue | undefined {
  let value: JsonValue | undefined = query.root === "$" ? root : current;
  for (const segment of query.segments) {
    const selector = segment.selectors[0];
    if (selector?.kind === "name") {
      if (!isObject(value) || !Object.hasOwn(value, selector.name)) return undefined;
      value = value[selector.name];
    } else if (selector?.kind === "index") {
      if (!Array.isArray(value)) return undefined;
      const i = selector.index >= 0 ? selector.index : value.length + selector.index;
      if (i < 0 || i >= value.length) return undefined;
      value = value[i];
    } else {
      return undefined;
    }
  }
  return value;
}

/** Deep equality of JSON values (RFC 9535 section 2.3.5.2.2). */
function equal(a: JsonValue, b: JsonValue): boolean {
  spend(typeof a === "string" ? a.length + 1 : 1);
  if (a === b) return true;
  if (Array.isArray(a)) {
    return (
      Array.isArray(b) && a.length === b.length && a.every((v, i) => equal(v, b[i] as JsonValue))
    );
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every((k) => Object.hasOwn(b, k) && equal(a[k] as JsonValue, b[k] as JsonValue));
  }
  return false;
}

/** Compares strings by Unicode scalar values (UTF-16 order differs above U+D7FF). */
function lessString(a: string, b: string): boolean {
  spend(a.length + b.length);
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const p = x[i]?.codePointAt(0) ?? 0;
    const q = y[i]?.codePointAt(0) ?? 0;
    if (p !== q) return p < q;
  }
  return x.length < y.length;
}

function less(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (typeof a === "number" && typeof b === "number") return a < b;
  if (typeof a === "string" && typeof b === "string") return lessString(a, b);
  return false;
}

function same(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return equal(a, b);
}

function compare(
  op: "==" | "!=" | "<" | "<=" | ">" | ">=",
  a: JsonValue | undefined,
  b: JsonValue | undefined,
): boolean {
  switch (op) {
    case "==":
      return same(a, b);
    case "!=":
      return !same(a, b);
    case "<":
      return less(a, b);
    case "<=":
      return less(a, b) || same(a, b);
    case ">":
      return less(b, a);
    case ">=":
      return less(b, a) || same(a, b);
  }
}

/** An argument's value: a JSON value (undefined = Nothing), a nodelist or a logical value. */
function argument(
  arg: FunctionArgument,
  current: JsonValue,
  root: JsonValue,
): JsonValue | undefined | JsonPathNode[] | boolean {
  switch (arg.kind) {
    case "literal":
      return arg.value;
    case "query": {
      if (arg.as === "value") return singularValue(arg.query, current, root);
      return evaluateJsonPath(arg.query, root, current);
    }
    case "logical":
      return testFilter(arg.expr, current, root);
    case "call":
      return callFunction(arg.call, current, root);
  }
}

/** Runs a standard function extension (RFC 9535 section 2.4). */
function callFunction(
  call: FunctionCall,
  current: JsonValue,
  root: JsonValue,
): JsonValue | undefined | boolean {
  const args = call.args.map((a) => argument(a, current, root));
  switch (call.name) {
    case "length": {
      const v = args[0] as JsonValue | undefined;
      if (typeof v === "string") {
        spend(v.length);
        return Array.from(v).length;
      }
      if (Array.isArray(v)) return v.length;
      if (isObject(v)) return Object.keys(v).length;
      return undefined;
    }
    case "count":
      return (args[0] as JsonPathNode[]).length;
    case "value": {
      const nodes = args[0] as JsonPathNode[];
      return nodes.length === 1 ? nodes[0]?.value : undefined;
    }
    case "match":
    case "search": {
      const [text, pattern] = args;
      if (typeof text !== "string" || typeof pattern !== "string") return false;
      // RE2 takes about as long to compile a pattern as to run it over 256 characters a unit.
      const re = compileIRegexp(pattern, call.name === "match", (weight) => spend(256 * weight));
      if (re === null) return false;
      spend(pattern.length + text.length * re.weight);
      return re.regexp.test(text);
    }
  }
}
