/** LiteralFinder finds a fixed byte string in buffers, like `Buffer.indexOf`, only faster on text. */
export interface LiteralFinder {
  /** The first offset at or after `from` where the needle occurs wholly inside `haystack`, or -1. */
  indexOf(haystack: Buffer, from: number): number;
}

/** Bytes of a buffer looked at to learn which needle byte is rarest. */
const sampleBytes = 64 * 1024;
/**
 * Past one false hit per this many bytes, comparing at every hit costs more than Node's own
 * substring search (about 0.3 ns a byte against some 200 ns a hit), which then takes over.
 */
const bytesPerFalseHit = 1024;

/**
 * createLiteralFinder returns a finder that scans for the needle's rarest byte with memchr
 * (`Buffer.indexOf` of one byte) and compares the needle only where that byte occurs, the way
 * grep and ripgrep skip through text. The rarest byte is learned once, from the first 64 KiB
 * searched; when even it is common there, or proves common later (too many hits that are not
 * the needle), Node's own `Buffer.indexOf(needle)` does the rest of the search. Results are
 * exactly `haystack.indexOf(needle, from)`.
 */
export function createLiteralFinder(needle: Buffer): LiteralFinder {
  // The needle byte to scan for; -1 until learned; plain search once it is known to be common.
  let rare = -1;
  let plain = false;
  let current: Buffer | undefined;
  let scanned = 0;
  let falseHits = 0;
  const learn = (sample: Buffer): void => {
    const counts = new Uint32Array(256);
    const end = Math.min(sample.length, sampleBytes);
    for (let i = 0; i < end; i++) {
      const b = sample[i] as number;
      counts[b] = (counts[b] ?? 0) + 1;
    }
    let best = 0;
    for (let k = 1; k < needle.length; k++) {
      if ((counts[needle[k] as number] ?? 0) < (counts[needle[best] as number] ?? 0)) best = k;
    }
    rare = best;
    plain = (counts[needle[best] as number] ?? 0) > end / bytesPerFalseHit;
  };
  return {
    indexOf(haystack, from) {
      const start = Math.max(0, from);
      if (needle.length === 0) return Math.min(start, haystack.length);
      if (rare < 0) learn(haystack);
      if (plain) return haystack.indexOf(needle, start);
      if (haystack !== current) {
        current = haystack;
        scanned = 0;
        falseHits = 0;
      }
      const byte = needle[rare] as number;
      const last = haystack.length - needle.length;
      let at = start;
      while (at <= last) {
        const hit = haystack.indexOf(byte, at + rare);
        if (hit < 0 || hit - rare > last) break;
        const candidate = hit - rare;
        if (
          haystack.compare(needle, 0, needle.length, candidate, candidate + needle.length) === 0
        ) {
          scanned += candidate - at;
          return candidate;
        }
        scanned += candidate + 1 - at;
        at = candidate + 1;
        if (++falseHits > 16 + scanned / bytesPerFalseHit) {
          plain = true;
          return haystack.indexOf(needle, at);
        }
      }
      return -1;
    },
  };
}
