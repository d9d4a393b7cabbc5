import RE2 from "re2";

/**
 * CompiledIRegexp is a compiled I-Regexp and its weight: a rough size of the automaton RE2
 * runs, so that a caller can charge a match by the text's length times it (a pattern such as
 * `(.{100}){10}x` costs RE2 about a thousand times what `x` does per character).
 */
export interface CompiledIRegexp {
  readonly regexp: RE2;
  readonly weight: number;
}

/** Compiled patterns by source and mode; bounded so hostile documents cannot grow it. */
const cache = new Map<string, CompiledIRegexp | null>();
const cacheEntries = 256;

/**
 * Rewrites an I-Regexp (RFC 9485) as an RE2 expression: `.` outside a character class matches
 * any character but `\n` and `\r`, as I-Regexp says (RE2's `.` only excludes `\n`).
 */
function translate(pattern: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      out += c + (pattern[i + 1] ?? "");
      i++;
    } else if (inClass) {
      if (c === "]") inClass = false;
      out += c;
    } else if (c === "[") {
      inClass = true;
      out += c;
      // A `]` right after `[` or `[^` is a literal member, not the class's end.
      if (pattern[i + 1] === "^") {
        out += "^";
        i++;
      }
    } else if (c === ".") {
      out += "[^\\n\\r]";
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * patternWeight estimates the size of a pattern's automaton: each atom counts 1 (a Unicode
 * property class `\p{..}` 8, as RE2 expands it to many ranges), a group the sum of what it
 * holds, and a bounded repetition `{n,m}` multiplies what it repeats by its largest count.
 */
export function patternWeight(pattern: string): number {
  // A stack of groups: the weight summed so far and the weight of the last atom.
  const groups: { sum: number; last: number }[] = [{ sum: 0, last: 0 }];
  const top = () => groups[groups.length - 1] as { sum: number; last: number };
  const atom = (w: number) => {
    top().sum += w;
    top().last = w;
  };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      const next = pattern[i + 1];
      if ((next === "p" || next === "P") && pattern[i + 2] === "{") {
        i = Math.max(i + 2, pattern.indexOf("}", i + 2));
        atom(8);
      } else {
        i++;
        atom(1);
      }
    } else if (c === "[") {
      // A class is one atom, whatever it lists.
      let j = i + 1;
      if (pattern[j] === "^") j++;
      if (pattern[j] === "]") j++;
      while (j < pattern.length && pattern[j] !== "]") j += pattern[j] === "\\" ? 2 : 1;
      atom(/\\[pP]\{/.test(pattern.slice(i, j)) ? 8 : 1);
      i = j;
    } else if (c === "(") {
      groups.push({ sum: 0, last: 0 });
    } else if (c === ")" && groups.length > 1) {
      const inner = groups.pop()?.sum ?? 0;
      atom(inner);
    } else if (c === "{") {
      const close = pattern.indexOf("}", i);
      const counts = close < 0 ? [] : pattern.slice(i + 1, close).split(",");
      const most = Math.max(
        ...counts.map((n) => Number.parseInt(n, 10)).filter(Number.isFinite),
        1,
      );
      const t = top();
      t.sum += t.last * (most - 1);
      t.last *= most;
      if (close > i) i = close;
    } else if (c !== "*" && c !== "+" && c !== "?" && c !== "|") {
      atom(1);
    }
  }
  while (groups.length > 1) atom(groups.pop()?.sum ?? 0);
  return Math.max(1, top().sum);
}

/**
 * compileIRegexp compiles an I-Regexp for RE2 (linear-time matching): `whole` anchors it to
 * the whole string (the `match` function), otherwise it matches anywhere (`search`). It returns
 * null for a pattern RE2 does not accept, which the JSONPath functions treat as no match.
 * `beforeCompiling` is called with the pattern's weight when it is not in the cache, before
 * RE2 compiles it (which takes tens of milliseconds for a weight in the thousands): it may
 * throw to refuse the work.
 */
export function compileIRegexp(
  pattern: string,
  whole: boolean,
  beforeCompiling?: (weight: number) => void,
): CompiledIRegexp | null {
  const key = `${whole ? "m" : "s"}${pattern}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  beforeCompiling?.(patternWeight(pattern));
  let compiled: CompiledIRegexp | null;
  try {
    // I-Regexp has no backreferences, lookaround or lazy quantifiers: RE2 refuses the first
    // two, and a lazy quantifier is not valid I-Regexp either.
    if (/\(\?|\\[1-9]|[*+?}]\?/.test(pattern)) throw new Error("not an I-Regexp");
    const source = translate(pattern);
    const regexp = new RE2(whole ? `^(?:${source})$` : source, "u");
    compiled = { regexp, weight: patternWeight(pattern) };
  } catch {
    compiled = null;
  }
  if (cache.size >= cacheEntries) cache.clear();
  cache.set(key, compiled);
  return compiled;
}
