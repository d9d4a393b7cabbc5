import { Code, ConnectError } from "@connectrpc/connect";
import type {
  Comparable,
  FunctionArgument,
  FunctionCall,
  FunctionType,
  JsonPathQuery,
  JsonPathSegment,
  JsonPathSelector,
  JsonValue,
  LogicalExpr,
} from "./jsonpath-ast.js";

/** The largest magnitude of an index or slice bound (I-JSON's exact integers). */
const maxExactInteger = 2 ** 53 - 1;

/** The standard function extensions: parameter types and result type. */
const functions: Record<FunctionCall["name"], { params: FunctionType[]; result: FunctionType }> = {
  length: { params: ["value"], result: "value" },
  count: { params: ["nodes"], result: "value" },
  match: { params: ["value", "value"], result: "logical" },
  search: { params: ["value", "value"], result: "logical" },
  value: { params: ["nodes"], result: "value" },
};

/** A filter operand before its context decides what it must be. */
type Term =
  | { readonly t: "literal"; readonly value: JsonValue; readonly at: number }
  | { readonly t: "query"; readonly query: JsonPathQuery; readonly at: number }
  | {
      readonly t: "call";
      readonly call: FunctionCall;
      readonly type: FunctionType;
      readonly at: number;
    }
  | { readonly t: "logical"; readonly expr: LogicalExpr; readonly at: number };

/** True when every segment selects at most one node: one name or index, no descendants. */
export function isSingularQuery(query: JsonPathQuery): boolean {
  return query.segments.every(
    (s) =>
      s.kind === "child" &&
      s.selectors.length === 1 &&
      (s.selectors[0]?.kind === "name" || s.selectors[0]?.kind === "index"),
  );
}

/** ALPHA / "_" / %x80-D7FF / %xE000-10FFFF. */
function isNameFirst(c: string | undefined): boolean {
  if (c === undefined) return false;
  const cp = c.codePointAt(0) ?? 0;
  return (
    (cp >= 0x41 && cp <= 0x5a) ||
    (cp >= 0x61 && cp <= 0x7a) ||
    cp === 0x5f ||
    (cp >= 0x80 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0x10ffff)
  );
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= "0" && c <= "9";
}

function isBlank(c: string | undefined): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\r";
}

/** Shows the character at an error position. */
function describe(c: string | undefined): string {
  if (c === undefined) return "the end of the query";
  if (c.length === 1 && c < " ") return `U+${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  return `'${c}'`;
}

/**
 * parseJsonPath parses an RFC 9535 JSONPath query (the whole grammar, with the standard
 * function extensions length, count, match, search and value and their well-typedness rules).
 *
 * Guarantees: it returns the query's syntax tree, or throws INVALID_ARGUMENT whose message
 * names the 0-based position (in code points) of the first character that does not fit and
 * what was expected there. No whitespace is allowed before `$` or after the last segment.
 */
export function parseJsonPath(text: string): JsonPathQuery {
  const chars = Array.from(text);
  let pos = 0;

  const fail = (expected: string, at: number = pos): never => {
    throw new ConnectError(
      `invalid JSONPath query at position ${at}: expected ${expected}, found ${describe(chars[at])}`,
      Code.InvalidArgument,
    );
  };
  const peek = (ahead = 0): string | undefined => chars[pos + ahead];
  const skipBlank = (): void => {
    while (isBlank(chars[pos])) pos++;
  };
  const eat = (token: string): boolean => {
    for (let i = 0; i < token.length; i++) if (chars[pos + i] !== token[i]) return false;
    pos += token.length;
    return true;
  };
  const expect = (token: string): void => {
    if (!eat(token)) fail(`'${token}'`);
  };

  const parseStringLiteral = (): string => {
    const quote = chars[pos];
    const start = pos;
    pos++;
    let out = "";
    for (;;) {
      const c = chars[pos];
      if (c === undefined) return fail(`a closing ${quote} for the string at position ${start}`);
      if (c === quote) {
        pos++;
        return out;
      }
      if (c === "\\") {
        const e = chars[pos + 1];
        const simple: Record<string, string> = {
          b: "\b",
          f: "\f",
          n: "\n",
          r: "\r",
          t: "\t",
          "/": "/",
          "\\": "\\",
        };
        if (e !== undefined && simple[e] !== undefined) {
          out += simple[e];
          pos += 2;
        } else if (e === quote) {
          out += quote;
          pos += 2;
        } else if (e === "u") {
          pos += 2;
          const unit = parseHex4();
          if (unit >= 0xdc00 && unit <= 0xdfff) fail("a high surrogate first", pos - 4);
          if (unit >= 0xd800 && unit <= 0xdbff) {
            if (!(chars[pos] === "\\" && chars[pos + 1] === "u")) {
              fail("'\\u' and a low surrogate after a high surrogate");
            }
            pos += 2;
            const low = parseHex4();
            if (low < 0xdc00 || low > 0xdfff) fail("a low surrogate", pos - 4);
            out += String.fromCharCode(unit, low);
          } else {
            out += String.fromCharCode(unit);
          }
        } else {
          fail(`an escape (b f n r t / \\ ${quote} u) after '\\'`, pos + 1);
        }
        continue;
      }
      const cp = c.codePointAt(0) ?? 0;
      if (cp < 0x20 || (cp >= 0xd800 && cp <= 0xdfff)) {
        fail("a character (control characters must be escaped)");
      }
      out += c;
      pos++;
    }
  };
  const parseHex4 = (): number => {
    let value = 0;
    for (let i = 0; i < 4; i++) {
      const c = chars[pos];
      const digit = c === undefined ? Number.NaN : Number.parseInt(c, 16);
      if (Number.isNaN(digit) || c === undefined || !/[0-9a-fA-F]/.test(c)) {
        fail("a hexadecimal digit");
      }
      value = value * 16 + digit;
      pos++;
    }
    return value;
  };

  /** int = "0" / (["-"] DIGIT1 *DIGIT), within ±(2^53-1). */
  const parseInteger = (): number => {
    const start = pos;
    if (peek() === "-") pos++;
    if (peek() === "0") {
      pos++;
      if (chars[start] === "-") fail("a non-zero digit after '-'", start + 1);
      if (isDigit(peek())) fail("no leading zeros", start);
    } else {
      if (!isDigit(peek())) fail("a digit");
      while (isDigit(peek())) pos++;
    }
    const value = Number(chars.slice(start, pos).join(""));
    if (Math.abs(value) > maxExactInteger) fail("an integer within ±(2^53-1)", start);
    return value;
  };

  const parseNumberLiteral = (): number => {
    const start = pos;
    if (peek() === "-") pos++;
    if (peek() === "0") pos++;
    else if (isDigit(peek())) while (isDigit(peek())) pos++;
    else fail("a digit");
    if (peek() === "0" || isDigit(peek())) fail("no leading zeros", start);
    if (peek() === ".") {
      pos++;
      if (!isDigit(peek())) fail("a digit after '.'");
      while (isDigit(peek())) pos++;
    }
    if (peek() === "e" || peek() === "E") {
      pos++;
      if (peek() === "+" || peek() === "-") pos++;
      if (!isDigit(peek())) fail("a digit in the exponent");
      while (isDigit(peek())) pos++;
    }
    return Number(chars.slice(start, pos).join(""));
  };

  const parseSelector = (): JsonPathSelector => {
    const c = peek();
    if (c === "'" || c === '"') return { kind: "name", name: parseStringLiteral() };
    if (c === "*") {
      pos++;
      return { kind: "wildcard" };
    }
    if (c === "?") {
      pos++;
      skipBlank();
      const at = pos;
      return { kind: "filter", expr: toLogical(parseOr(), at) };
    }
    if (c === ":" || c === "-" || isDigit(c)) {
      let start: number | undefined;
      if (c !== ":") {
        start = parseInteger();
        const before = pos;
        skipBlank();
        if (peek() !== ":") {
          pos = before;
          return { kind: "index", index: start };
        }
      }
      expect(":");
      skipBlank();
      let end: number | undefined;
      let step: number | undefined;
      if (peek() === "-" || isDigit(peek())) {
        end = parseInteger();
        skipBlank();
      }
      if (eat(":")) {
        skipBlank();
        if (peek() === "-" || isDigit(peek())) step = parseInteger();
      }
      return { kind: "slice", start, end, step };
    }
    return fail("a selector (a quoted name, '*', an index, a slice or '?')");
  };

  const parseBracketed = (): JsonPathSelector[] => {
    expect("[");
    skipBlank();
    const selectors = [parseSelector()];
    for (;;) {
      skipBlank();
      if (eat("]")) return selectors;
      if (!eat(",")) fail("',' or ']'");
      skipBlank();
      selectors.push(parseSelector());
    }
  };

  const parseShorthand = (): string => {
    if (!isNameFirst(peek())) fail("a member name, '*' or '['");
    const start = pos;
    while (isNameFirst(peek()) || isDigit(peek())) pos++;
    return chars.slice(start, pos).join("");
  };

  const parseSegments = (): JsonPathSegment[] => {
    const segments: JsonPathSegment[] = [];
    for (;;) {
      const before = pos;
      skipBlank();
      const c = peek();
      if (c === "[") {
        segments.push({ kind: "child", selectors: parseBracketed() });
      } else if (c === "." && peek(1) === ".") {
        pos += 2;
        if (peek() === "[") segments.push({ kind: "descendant", selectors: parseBracketed() });
        else if (eat("*")) segments.push({ kind: "descendant", selectors: [{ kind: "wildcard" }] });
        else
          segments.push({
            kind: "descendant",
            selectors: [{ kind: "name", name: parseShorthand() }],
          });
      } else if (c === ".") {
        pos++;
        if (eat("*")) segments.push({ kind: "child", selectors: [{ kind: "wildcard" }] });
        else
          segments.push({ kind: "child", selectors: [{ kind: "name", name: parseShorthand() }] });
      } else {
        pos = before;
        return segments;
      }
    }
  };

  const parseQuery = (): JsonPathQuery => {
    const root = peek();
    if (root !== "$" && root !== "@") return fail("'$' or '@'");
    pos++;
    return { root, segments: parseSegments() };
  };

  const parseCall = (): Term => {
    const at = pos;
    const start = pos;
    while (/[a-z0-9_]/.test(peek() ?? "")) pos++;
    const name = chars.slice(start, pos).join("");
    if (peek() !== "(") return fail("'(' after a function name");
    const signature = Object.hasOwn(functions, name)
      ? functions[name as FunctionCall["name"]]
      : undefined;
    if (signature === undefined) {
      return fail("a function (length, count, match, search or value)", at);
    }
    pos++;
    skipBlank();
    const args: FunctionArgument[] = [];
    if (peek() !== ")") {
      for (;;) {
        const argAt = pos;
        const param = signature.params[args.length];
        if (param === undefined) {
          fail(`')': ${name}() takes ${signature.params.length} argument(s)`, argAt);
        }
        args.push(toArgument(parseOr(), param as FunctionType, argAt));
        skipBlank();
        if (peek() === ")") break;
        if (!eat(",")) fail("',' or ')'");
        skipBlank();
      }
    }
    if (args.length !== signature.params.length) {
      fail(`${signature.params.length} argument(s) for ${name}()`);
    }
    pos++;
    return {
      t: "call",
      call: { name: name as FunctionCall["name"], args },
      type: signature.result,
      at,
    };
  };

  /** A literal, a query, a function call or a parenthesized / negated logical expression. */
  const parsePrimary = (): Term => {
    const at = pos;
    const c = peek();
    if (c === "$" || c === "@") return { t: "query", query: parseQuery(), at };
    if (c === "'" || c === '"') return { t: "literal", value: parseStringLiteral(), at };
    if (c === "-" || isDigit(c)) return { t: "literal", value: parseNumberLiteral(), at };
    if (c !== undefined && c >= "a" && c <= "z") {
      for (const [word, value] of [
        ["true", true],
        ["false", false],
        ["null", null],
      ] as const) {
        if (
          chars.slice(pos, pos + word.length).join("") === word &&
          chars[pos + word.length] !== "("
        ) {
          const next = chars[pos + word.length];
          if (!(isNameFirst(next) || isDigit(next))) {
            pos += word.length;
            return { t: "literal", value, at };
          }
        }
      }
      return parseCall();
    }
    return fail("a literal, a query ('$' or '@'), a function, '!' or '('");
  };

  const parseBasic = (): Term => {
    const at = pos;
    if (eat("!")) {
      skipBlank();
      const inner = at + 1;
      if (eat("(")) {
        skipBlank();
        const expr = toLogical(parseOr(), pos);
        skipBlank();
        expect(")");
        return { t: "logical", expr: { kind: "not", operand: expr }, at };
      }
      const c = peek();
      const term =
        c === "$" || c === "@"
          ? parsePrimary()
          : c !== undefined && c >= "a" && c <= "z"
            ? parseCall()
            : fail("a query, a function or '(' after '!'");
      return { t: "logical", expr: { kind: "not", operand: toLogical(term, inner) }, at };
    }
    if (eat("(")) {
      skipBlank();
      const innerAt = pos;
      const expr = toLogical(parseOr(), innerAt);
      skipBlank();
      expect(")");
      return { t: "logical", expr, at };
    }
    const left = parsePrimary();
    const before = pos;
    skipBlank();
    const op = (["==", "!=", "<=", ">=", "<", ">"] as const).find((o) => eat(o));
    if (op === undefined) {
      pos = before;
      return left;
    }
    skipBlank();
    const rightAt = pos;
    const right = parsePrimary();
    return {
      t: "logical",
      expr: {
        kind: "compare",
        op,
        left: toComparable(left),
        right: toComparable(right, rightAt),
      },
      at,
    };
  };

  /** Operands of one operator (`&&` binds tighter than `||`); one term when there is no operator. */
  const parseChain = (op: "&&" | "||", kind: "and" | "or", operand: () => Term): Term => {
    const first = operand();
    const operands: LogicalExpr[] = [];
    for (;;) {
      const before = pos;
      skipBlank();
      if (!eat(op)) {
        pos = before;
        break;
      }
      if (operands.length === 0) operands.push(toLogical(first, first.at));
      skipBlank();
      const at = pos;
      operands.push(toLogical(operand(), at));
    }
    return operands.length === 0 ? first : { t: "logical", expr: { kind, operands }, at: first.at };
  };
  const parseAnd = (): Term => parseChain("&&", "and", parseBasic);
  function parseOr(): Term {
    return parseChain("||", "or", parseAnd);
  }

  /** A term in a test or logical position: a query tests existence; a literal is refused. */
  function toLogical(term: Term, at: number): LogicalExpr {
    switch (term.t) {
      case "logical":
        return term.expr;
      case "query":
        return { kind: "exists", query: term.query };
      case "call":
        if (term.type === "value") {
          return fail(`a logical expression (${term.call.name}() returns a value; compare it)`, at);
        }
        return { kind: "test", call: term.call };
      case "literal":
        return fail("a query, a function or a comparison (a literal alone is not a test)", at);
    }
  }

  /** A term on one side of a comparison: a literal, a singular query or a value function. */
  function toComparable(term: Term, at: number = term.at): Comparable {
    switch (term.t) {
      case "literal":
        return { kind: "literal", value: term.value };
      case "query":
        if (!isSingularQuery(term.query)) {
          return fail("a singular query (names and indices only) in a comparison", at);
        }
        return { kind: "singular", query: term.query };
      case "call":
        if (term.type !== "value") {
          return fail(`a comparable value (${term.call.name}() returns a logical value)`, at);
        }
        return { kind: "call", call: term.call };
      case "logical":
        return fail("a literal, a singular query or a value function in a comparison", at);
    }
  }

  /** A term passed to a function parameter of `type`. */
  function toArgument(term: Term, type: FunctionType, at: number): FunctionArgument {
    if (type === "value") {
      const comparable = toComparable(term, at);
      if (comparable.kind === "singular") {
        return { kind: "query", query: comparable.query, as: "value" };
      }
      return comparable;
    }
    if (type === "nodes") {
      if (term.t === "query") return { kind: "query", query: term.query, as: "nodes" };
      if (term.t === "call" && term.type === "nodes") return { kind: "call", call: term.call };
      return fail("a query (this parameter takes a nodelist)", at);
    }
    return { kind: "logical", expr: toLogical(term, at) };
  }

  if (peek() !== "$") fail("'$' at the start of the query");
  pos++;
  const query: JsonPathQuery = { root: "$", segments: parseSegments() };
  if (pos < chars.length) fail("'.', '..' or '[' (or the end of the query)");
  return query;
}
