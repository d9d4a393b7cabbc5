/** LiteralFinder finds a fixed byte string in buffers, like `Buffer.indexOf`, only faster on text. */
export interface LiteralFinder {
  /** The first offset at or after `from` where the needle occurs wholly inside `haystack`, or -1. */
  indexOf(haystack: Buffer, from: number): number;
}

/** Bytes of a buffer looked at to learn which needle bytes are rarest. */
const sampleBytes = 64 * 1024;
/**
 * Longest piece of the needle, from a rare byte on, that the scan looks for: Node finds strings
 * shorter than 7 bytes by memchr on their first byte, longer ones by Boyer-Moore-Horspool, which
 * does not skip by that byte.
 */
const probeBytes = 6;
/** Rarest needle bytes whose probes are tried on the sample; the cheapest is kept. */
const anchorsTried = 3;
/**
 * Estimated costs, in ns, of a stop of Node's memchr on the probe's first byte (a few bytes
 * compared in C++) and of a probe hit (back in JavaScript: a call into `Buffer.indexOf` and a
 * byte compared). A probe's cost on the sample is its first byte's count times the one plus its
 * hits times the other.
 */
const anchorStopNs = 3;
const probeHitNs = 30;
/**
 * Node's own substring search of the whole needle costs about 0.25 ns a byte of text: past one
 * probe hit (probeHitNs) per this many bytes, the probe scan is no faster, and it takes over.
 */
const bytesPerProbeHit = 128;
/**
 * Node finds a short probe by running memchr on its first byte: when even the rarest needle byte
 * is this frequent, that memchr stops too often to beat the whole-needle search.
 */
const bytesPerAnchorByte = 16;

/** How the needle is looked for: a probe from a rare byte of it, and a second byte to check. */
export interface LiteralPlan {
  /** Offset in the needle where the probe starts (one of its rarest bytes). */
  readonly anchor: number;
  /** needle[anchor, anchor + probeBytes): found by Node's memchr-led search of short strings. */
  readonly probe: Buffer;
  /** Offset of the rarest needle byte outside the probe, checked before a full compare; -1: none. */
  readonly guard: number;
}

/** Counts each byte value in the first sampleBytes of `sample`. */
function byteCounts(sample: Buffer): { counts: Uint32Array; end: number } {
  const counts = new Uint32Array(256);
  const end = Math.min(sample.length, sampleBytes);
  for (let i = 0; i < end; i++) {
    const b = sample[i] as number;
    counts[b] = (counts[b] ?? 0) + 1;
  }
  return { counts, end };
}

/**
 * sampleOccurrences counts the occurrences of `text` (overlapping ones too) in the first 64 KiB
 * of `sample`: the stretch a finder learns its plan from.
 */
export function sampleOccurrences(sample: Buffer, text: Buffer): number {
  const head = sample.subarray(0, sampleBytes);
  let count = 0;
  for (let at = head.indexOf(text); at >= 0; at = head.indexOf(text, at + 1)) count++;
  return count;
}

/**
 * Sample bytes per occurrence below which a text is too common to test each line holding it
 * with RE2: a line test costs about what running the expression over a KiB of lines does.
 */
const bytesPerLineTest = 1024;

/**
 * commonInSample reports whether `count` occurrences in `sample` (counted as
 * sampleOccurrences does) are more than one a KiB: a search for an expression whose every
 * match holds the text then runs the expression over every line instead.
 */
export function commonInSample(count: number, sample: Buffer): boolean {
  return count > Math.min(sample.length, sampleBytes) / bytesPerLineTest;
}

/**
 * planLiteralSearch plans a search from a sample of the text: the probe starts at one of the
 * needle's rarest bytes, the one whose probe the sample says is cheapest to scan for; the
 * guard is the rarest needle byte outside the probe. Undefined when the sample says Node's own
 * search of the whole needle is faster (a needle of one byte, or no byte of it rare enough).
 */
export function planLiteralSearch(needle: Buffer, sample: Buffer): LiteralPlan | undefined {
  if (needle.length < 2) return undefined;
  const { counts, end } = byteCounts(sample);
  const count = (k: number) => counts[needle[k] as number] ?? 0;
  // The needle's positions, rarest byte first (earlier first among equals).
  const byRarity = Array.from(needle.keys()).sort((a, b) => count(a) - count(b) || a - b);
  let best: { anchor: number; probe: Buffer; hits: number; cost: number } | undefined;
  for (const anchor of byRarity.slice(0, anchorsTried)) {
    if (count(anchor) > end / bytesPerAnchorByte) break;
    const probe = needle.subarray(anchor, Math.min(needle.length, anchor + probeBytes));
    const hits = sampleOccurrences(sample, probe);
    const cost = count(anchor) * anchorStopNs + hits * probeHitNs;
    if (best === undefined || cost < best.cost) best = { anchor, probe, hits, cost };
  }
  if (best === undefined || best.hits > end / bytesPerProbeHit) return undefined;
  const { anchor, probe } = best;
  let guard = -1;
  for (let k = 0; k < needle.length; k++) {
    if (k >= anchor && k < anchor + probe.length) continue;
    if (guard < 0 || count(k) < count(guard)) guard = k;
  }
  return { anchor, probe, guard };
}

/**
 * createLiteralFinder returns a finder that looks for a short probe of the needle starting at
 * a rare byte of it (Node runs memchr on that byte and compares the few bytes after it in C++),
 * checks the needle's rarest byte outside the probe, and compares the whole needle only where
 * both agree: the way grep and ripgrep skip through text, and on a log whose needle bytes are
 * all common (every byte of `session token expired` in a service log) still about twice as fast
 * as Node's search of the whole needle. The plan is learned once, from the first 64 KiB
 * searched; when the probe is common there, or proves common later, Node's own
 * `Buffer.indexOf(needle)` does the rest of the search. Results are exactly
 * `haystack.indexOf(needle, from)`.
 */
export function createLiteralFinder(needle: Buffer): LiteralFinder {
  // Unset until learned; "plain" once the probe is known to be common.
  let plan: LiteralPlan | "plain" | undefined;
  let current: Buffer | undefined;
  let scanned = 0;
  let hits = 0;
  return {
    indexOf(haystack, from) {
      const start = Math.max(0, from);
      if (needle.length === 0) return Math.min(start, haystack.length);
      plan ??= planLiteralSearch(needle, haystack) ?? "plain";
      if (plan === "plain") return haystack.indexOf(needle, start);
      if (haystack !== current) {
        current = haystack;
        scanned = 0;
        hits = 0;
      }
      const { anchor, probe, guard } = plan;
      const guardByte = guard < 0 ? 0 : (needle[guard] as number);
      const last = haystack.length - needle.length;
      let at = start;
      while (at <= last) {
        const hit = haystack.indexOf(probe, at + anchor);
        if (hit < 0 || hit - anchor > last) break;
        const candidate = hit - anchor;
        scanned += candidate + 1 - at;
        if (
          (guard < 0 || haystack[candidate + guard] === guardByte) &&
          haystack.compare(needle, 0, needle.length, candidate, candidate + needle.length) === 0
        ) {
          return candidate;
        }
        at = candidate + 1;
        if (++hits > 16 + scanned / bytesPerProbeHit) {
          plan = "plain";
          return haystack.indexOf(needle, at);
        }
      }
      return -1;
    },
  };
}
