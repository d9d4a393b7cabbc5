import { readFile, writeFile } from "node:fs/promises";
import { USAGE_BODY } from "./usage.js";

/** The line that opens the generated flag reference in a markdown page. */
const FLAG_REFERENCE_BEGIN =
  "<!-- flag-reference:begin (generated from `spillway --help` by scripts/generate-flag-reference.sh; do not edit) -->";
/** The line that closes the generated flag reference. */
const FLAG_REFERENCE_END = "<!-- flag-reference:end -->";

/**
 * renderFlagReference returns the flag reference as markdown: the help text `spillway --help`
 * prints, without its version line, in a fenced block between the two marker lines.
 */
export function renderFlagReference(): string {
  return `${FLAG_REFERENCE_BEGIN}\n\n\`\`\`text\n${USAGE_BODY.trim()}\n\`\`\`\n\n${FLAG_REFERENCE_END}`;
}

/**
 * withFlagReference returns `page` with everything from its begin marker to its end marker
 * replaced by {@link renderFlagReference}. It throws when the page lacks either marker, so a
 * page that lost them is an error rather than a silent no-op.
 */
export function withFlagReference(page: string): string {
  const begin = page.indexOf(FLAG_REFERENCE_BEGIN);
  const end = page.indexOf(FLAG_REFERENCE_END);
  if (begin < 0 || end < begin) {
    throw new Error("the page has no flag-reference:begin ... flag-reference:end markers");
  }
  return page.slice(0, begin) + renderFlagReference() + page.slice(end + FLAG_REFERENCE_END.length);
}

/** writeFlagReference rewrites the generated section of the markdown file at `path` in place. */
export async function writeFlagReference(path: string): Promise<void> {
  const page = await readFile(path, "utf8");
  await writeFile(path, withFlagReference(page));
}
