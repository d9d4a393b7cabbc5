/**
 * The syntax tree of an RFC 9535 JSONPath query, as jsonpath-parse.ts produces it: a query is
 * a list of segments, each applying its selectors to the children (or, for a descendant
 * segment, the node and all its descendants' children) of every input node.
 */

/** JsonPathQuery is a whole query (`$...`) or a relative one (`@...`) inside a filter. */
export interface JsonPathQuery {
  /** `$` (absolute) or `@` (the filter's current node). */
  readonly root: "$" | "@";
  /** The segments, in order. */
  readonly segments: readonly JsonPathSegment[];
}

/** JsonPathSegment selects from the children (`child`) or all descendants (`descendant`). */
export interface JsonPathSegment {
  readonly kind: "child" | "descendant";
  readonly selectors: readonly JsonPathSelector[];
}

/** JsonPathSelector is one selector of a segment. */
export type JsonPathSelector =
  | { readonly kind: "name"; readonly name: string }
  | { readonly kind: "wildcard" }
  | { readonly kind: "index"; readonly index: number }
  | {
      readonly kind: "slice";
      readonly start: number | undefined;
      readonly end: number | undefined;
      readonly step: number | undefined;
    }
  | { readonly kind: "filter"; readonly expr: LogicalExpr };

/** JsonValue is a JSON value as the evaluator sees it (objects without a prototype). */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/** A function extension's declared result type (RFC 9535 section 2.4.1). */
export type FunctionType = "value" | "logical" | "nodes";

/** LogicalExpr is a filter expression yielding true or false. */
export type LogicalExpr =
  | { readonly kind: "or"; readonly operands: readonly LogicalExpr[] }
  | { readonly kind: "and"; readonly operands: readonly LogicalExpr[] }
  | { readonly kind: "not"; readonly operand: LogicalExpr }
  | {
      readonly kind: "compare";
      readonly op: "==" | "!=" | "<" | "<=" | ">" | ">=";
      readonly left: Comparable;
      readonly right: Comparable;
    }
  /** A query's nodelist is non-empty. */
  | { readonly kind: "exists"; readonly query: JsonPathQuery }
  /** A function whose result type is logical. */
  | { readonly kind: "test"; readonly call: FunctionCall };

/** Comparable is an operand of a comparison: a literal, a singular query or a value function. */
export type Comparable =
  | { readonly kind: "literal"; readonly value: JsonValue }
  | { readonly kind: "singular"; readonly query: JsonPathQuery }
  | { readonly kind: "call"; readonly call: FunctionCall };

/** FunctionArgument is an argument of a function extension, already checked against its type. */
export type FunctionArgument =
  | { readonly kind: "literal"; readonly value: JsonValue }
  /** A query passed as a value (singular) or a nodelist. */
  | { readonly kind: "query"; readonly query: JsonPathQuery; readonly as: "value" | "nodes" }
  | { readonly kind: "logical"; readonly expr: LogicalExpr }
  | { readonly kind: "call"; readonly call: FunctionCall };

/** FunctionCall is a call of one of the standard function extensions. */
export interface FunctionCall {
  readonly name: "length" | "count" | "match" | "search" | "value";
  readonly args: readonly FunctionArgument[];
}
