/** Characters that are literal when escaped with a backslash (RE2's punctuation escapes). */
const punctuation = new Set([..."\\.+*?()|[]{}^$-/ #&~,:;<=>@!%'\"`_"]);
/** Escapes whose meaning this reader does not follow: it gives up rather than guess. */
const unfollowed = new Set([..."pPxQC01234567"]);
/** An inline flag group, `(?i)` or `(?-m)`, which changes how the rest of the expression reads. */
const inlineFlags = /\(\?[a-zA-Z-]*\)/y;
/** Shortest literal worth scanning for ahead of the expression. */
const minLiteralChars = 3;

/** A quantifier (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`) and its lazy or possessive marker. */
const quantifier = /(?:[*+?]|\{\d+(?:,\d*)?\})[?+]?/y;

/** The index just past a quantifier that starts at `i`, or -1 when none does there. */
function quantifierEnd(source: string, i: number): number {
  quantifier.lastIndex = i;
  return quantifier.test(source) ? quantifier.lastIndex : -1;
}

/** The index just past the character class that opens at `i` (`[`), or -1 when it is unclosed. */
function classEnd(source: string, i: number): number {
  let j = i + 1;
  if (source[j] === "^") j++;
  // A `]` first in the class is one of its members.
  if (source[j] === "]") j++;
  while (j < source.length) {
    const c = source[j];
    if (c === "\\") j += 2;
    else if (c === "[" && source[j + 1] === ":") {
      const close = source.indexOf(":]", j + 2);
      if (close < 0) return -1;
      j = close + 2;
    } else if (c === "]") return j + 1;
    else j++;
  }
  return -1;
}

/** The index just past the group that opens at `i` (`(`), or -1 when it is unclosed. */
function groupEnd(source: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < source.length) {
    const c = source[j];
    if (c === "\\") j += 2;
    else if (c === "[") {
      j = classEnd(source, j);
      if (j < 0) return -1;
    } else {
      if (c === "(") depth++;
      else if (c === ")" && --depth === 0) return j + 1;
      j++;
    }
  }
  return -1;
}

/**
 * requiredLiterals returns pieces of plain text, of at least three characters each and longest
 * first, that every match of the RE2 expression `source` contains (all of them, case-sensitively,
 * on one line); none when it cannot name one. It reads only the top level of the expression:
 * runs of literal characters between groups, classes, anchors and quantified atoms (a
 * quantified character leaves the run, since it may occur zero times), and gives up on a
 * top-level `|`, an inline flag group (`(?i)`) and escapes it does not follow (`\p`, `\x`,
 * `\Q`, octal). A scan may look for any of them first and test the expression only on lines
 * that hold it.
 */
export function requiredLiterals(source: string): string[] {
  const runs: string[] = [];
  // Code points, so a quantifier takes a whole character off the run, never half a surrogate pair.
  let run: string[] = [];
  const endRun = () => {
    for (const piece of run.join("").split("\n")) {
      if (piece.length >= minLiteralChars) runs.push(piece);
    }
    run = [];
  };
  let i = 0;
  while (i < source.length) {
    const c = source[i] as string;
    const quantified = quantifierEnd(source, i);
    if (c === "\\") {
      const next = source[i + 1];
      if (next === undefined || unfollowed.has(next)) return [];
      if (punctuation.has(next)) {
        // A quantifier after the escaped character is handled with the next character.
        run.push(next);
      } else {
        // A class (\d, \w, \s), an assertion (\b, \A, \z) or a control escape (\n, \t).
        endRun();
      }
      i += 2;
    } else if (c === "[") {
      endRun();
      const end = classEnd(source, i);
      if (end < 0) return [];
      i = end;
    } else if (c === "(") {
      endRun();
      inlineFlags.lastIndex = i;
      if (inlineFlags.test(source)) return [];
      // Skipped whole: what a group holds may be optional or one of several alternatives.
      const end = groupEnd(source, i);
      if (end < 0) return [];
      i = end;
    } else if (c === "|") {
      return [];
    } else if (quantified > 0) {
      // The quantified atom, if it was the run's last character, may be absent (or repeated).
      run.pop();
      endRun();
      i = quantified;
    } else if (c === "." || c === "^" || c === "$") {
      endRun();
      i++;
    } else {
      const char = String.fromCodePoint(source.codePointAt(i) ?? 0);
      run.push(char);
      i += char.length;
    }
  }
  endRun();
  return runs.sort((a, b) => b.length - a.length);
}

/**
 * requiredBranchLiterals returns, for each top-level alternative of the RE2 expression `source`
 * (the expression itself when it has no top-level `|`), the texts requiredLiterals names in
 * it: every match holds all the texts of at least one alternative. Empty when some alternative
 * names none (an empty one matches anywhere), or the expression is unbalanced.
 */
export function requiredBranchLiterals(source: string): string[][] {
  const branches: string[] = [];
  let start = 0;
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (c === "\\") i += 2;
    else if (c === "[") {
      i = classEnd(source, i);
      if (i < 0) return [];
    } else if (c === "(") {
      i = groupEnd(source, i);
      if (i < 0) return [];
    } else {
      if (c === "|") {
        branches.push(source.slice(start, i));
        start = i + 1;
      }
      i++;
    }
  }
  branches.push(source.slice(start));
  const literals = branches.map(requiredLiterals);
  return literals.some((texts) => texts.length === 0) ? [] : literals;
}
