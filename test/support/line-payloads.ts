import fc from "fast-check";

/**
 * linePayloads generates payloads of up to `maxLines` lines, each up to six of `words` joined by
 * spaces, ended by `\n` or `\r\n` and with or without a final newline: the text search property
 * tests run on (words chosen so matches, near misses and partial matches all occur).
 */
export function linePayloads(words: readonly string[], maxLines: number): fc.Arbitrary<Buffer> {
  const line = fc
    .array(fc.constantFrom(...words), { maxLength: 6 })
    .map((parts) => parts.join(" "));
  return fc
    .tuple(fc.array(line, { maxLength: maxLines }), fc.boolean(), fc.boolean())
    .map(([lines, crlf, trailing]) =>
      Buffer.from(lines.join(crlf ? "\r\n" : "\n") + (trailing ? "\n" : ""), "utf8"),
    );
}
