/**
 * What stops an expression from running over many lines at once: `\A` and `\z` (the text's
 * start and end, a line's alone but a chunk's over many), flag groups that turn multi-line mode
 * off, and `\Q...\E` quoting, which the scan below does not follow into character classes.
 * Checked on the source as written, so an escaped backslash before `A` counts too: a false
 * alarm only costs the chunk scan.
 */
const unchunkable = /\\[AzQ]|\(\?[a-zA-Z]*-[a-zA-Z]*m/;

/** What an end-of-line `$` becomes over a chunk: the end of a line with its `\r\n` too. */
const lineEnd = "(?:\\r?$)";

/**
 * chunkExpression returns the RE2 expression to run over a chunk of many lines, in multi-line
 * mode, in place of `source` (an RE2 expression a line is tested with alone, its `\n` or
 * `\r\n` cut off): every line that `source` matches alone then holds the start of a match of
 * the returned expression in the chunk. It is `source` with each end-of-line anchor `$` (not
 * one escaped or inside a character class) widened to `\r?$`, since a chunk keeps the `\r` of a
 * line's `\r\n`, where multi-line `$` matches only before the `\n`. Undefined when the
 * expression means something else over a chunk (see unchunkable).
 *
 * The widened expression may match where `source` does not (before a `\r` a line keeps, or in
 * a line cut by the chunk's end): a chunk match is a candidate, which its line's own test
 * settles.
 */
export function chunkExpression(source: string): string | undefined {
  if (unchunkable.test(source)) return undefined;
  let out = "";
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (c === "\\") {
      out += source.slice(i, i + 2);
      i += 2;
    } else if (c === "[") {
      const end = classEnd(source, i);
      out += source.slice(i, end);
      i = end;
    } else {
      out += c === "$" ? lineEnd : c;
      i++;
    }
  }
  return out;
}

/** A named class inside a character class, `[:alpha:]` or `[:^alpha:]`, where it starts. */
const posixClass = /\[:\^?[a-z]+:\]/y;

/**
 * Where the character class opening at `open` ends (just past its `]`), as RE2 reads it: a `]`
 * first (after an optional `^`) is literal, `\` escapes the next character, and `[:name:]`
 * names a class of its own. An unclosed class runs to the end (RE2 refuses it anyway).
 */
function classEnd(source: string, open: number): number {
  let j = open + 1;
  if (source[j] === "^") j++;
  if (source[j] === "]") j++;
  while (j < source.length) {
    posixClass.lastIndex = j;
    if (source[j] === "\\") j += 2;
    else if (posixClass.test(source)) j = posixClass.lastIndex;
    else if (source[j] === "]") return j + 1;
    else j++;
  }
  return source.length;
}
