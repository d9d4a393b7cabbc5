import RE2 from "re2";

/** Compiled patterns by source and mode; bounded so hostile documents cannot grow it. */
const cache = new Map<string, RE2 | null>();
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
 * compileIRegexp compiles an I-Regexp for RE2 (linear-time matching): `whole` anchors it to
 * the whole string (the `match` function), otherwise it matches anywhere (`search`). It returns
 * null for a pattern RE2 does not accept, which the JSONPath functions treat as no match.
 */
export function compileIRegexp(pattern: string, whole: boolean): RE2 | null {
  const key = `${whole ? "m" : "s"}${pattern}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let compiled: RE2 | null;
  try {
    // I-Regexp has no backreferences, lookaround or lazy quantifiers: RE2 refuses the first
    // two, and a lazy quantifier is not valid I-Regexp either.
    if (/\(\?|\\[1-9]|[*+?}]\?/.test(pattern)) throw new Error("not an I-Regexp");
    const source = translate(pattern);
    compiled = new RE2(whole ? `^(?:${source})$` : source, "u");
  } catch {
    compiled = null;
  }
  if (cache.size >= cacheEntries) cache.clear();
  cache.set(key, compiled);
  return compiled;
}
