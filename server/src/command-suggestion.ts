/**
 * editDistance is the Levenshtein distance between two strings: the fewest single-character
 * insertions, deletions and substitutions that turn one into the other.
 */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * suggestCommand returns the known command an unknown one was most likely meant to be: the
 * closest by edit distance when at most 2 edits (and fewer than the unknown word's length)
 * away, or one the unknown word starts or ends with (`serve` for `server`, `sweep` for
 * `sweeper`); undefined when nothing is that close, so a wholly different word gets no guess.
 */
export function suggestCommand(given: string, known: readonly string[]): string | undefined {
  let best: { command: string; distance: number } | undefined;
  for (const command of known) {
    const distance = editDistance(given.toLowerCase(), command);
    if (best === undefined || distance < best.distance) best = { command, distance };
  }
  if (best !== undefined && best.distance <= Math.min(2, given.length - 1)) return best.command;
  const lower = given.toLowerCase();
  return known.find(
    (command) => command.length >= 4 && (lower.startsWith(command) || command.startsWith(lower)),
  );
}

/**
 * argumentProblem says what was wrong with the command line from the error `parseArgs` threw:
 * an unknown flag is named with the known flag it most likely meant (`unknown flag
 * "--max-blob-byte"; did you mean "--max-blob-bytes"?`); any other error keeps its message.
 * `flags` are the known flag names without their dashes.
 */
export function argumentProblem(err: unknown, flags: readonly string[]): string {
  const message = err instanceof Error ? err.message : String(err);
  const unknown = /^Unknown option '--?([^']+)'/.exec(message)?.[1];
  if (unknown === undefined) return message;
  const guess = suggestCommand(unknown, flags);
  return `unknown flag "--${unknown}"${guess === undefined ? "" : `; did you mean "--${guess}"?`}`;
}
