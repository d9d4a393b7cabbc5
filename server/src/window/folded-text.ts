/**
 * Shortest folded piece worth scanning for: a scan for fewer bytes stops too often to beat
 * RE2's own scan.
 */
const minPieceBytes = 3;
/** Bytes of a buffer looked at to learn which piece bytes are rarest. */
const sampleBytes = 64 * 1024;
/**
 * A piece whose rarest byte (either case) is more frequent than one in this many bytes of the
 * sample is not worth scanning for: each stop costs a compare in JavaScript.
 */
const bytesPerStop = 32;

/**
 * foldedPieces returns the runs, of at least three characters and longest first, of the texts'
 * characters whose case-insensitive matches under RE2's `iu` flags are only their ASCII lower
 * and upper case (printable ASCII and tab, except `k` and `s`, which also match U+212A KELVIN
 * SIGN and U+017F LATIN SMALL LETTER LONG S), lowercased. Every line a case-insensitive match
 * of the texts holds then holds each piece, ASCII case aside.
 */
export function foldedPieces(texts: readonly string[]): Buffer[] {
  const pieces: string[] = [];
  for (const text of texts) {
    // Split before lowercasing: a character outside ASCII may lowercase into it (U+0130).
    for (const run of text.split(/[^\t\x20-\x7e]|[kKsS]/)) {
      if (run.length >= minPieceBytes) pieces.push(run.toLowerCase());
    }
  }
  return pieces.sort((x, y) => y.length - x.length).map((piece) => Buffer.from(piece, "latin1"));
}

/** The byte with ASCII upper case lowered; every other byte as it is. */
function foldAscii(b: number): number {
  return b >= 65 && b <= 90 ? b + 32 : b;
}

/** How a folded piece is looked for: memchr on both cases of one byte, then a second byte. */
export interface FoldedPlan {
  /** Which of the pieces planned for is looked for. */
  readonly piece: number;
  /** Offset in the piece of the byte whose two cases are memchr'd (one of its rarest). */
  readonly anchor: number;
  /** Offset of the rarest other byte, checked before the whole piece; -1: none. */
  readonly guard: number;
}

/**
 * planFoldedSearch picks, from a sample of the text, the piece and the byte of it whose two
 * cases together are rarest (the earlier piece, foldedPieces giving the longest first, and the
 * earlier byte among equals) and the rarest byte of the piece besides it; undefined when there
 * is no piece or even the rarest byte is more frequent than one in 32 bytes of the sample.
 */
export function planFoldedSearch(
  pieces: readonly Uint8Array[],
  sample: Uint8Array,
): FoldedPlan | undefined {
  const counts = new Uint32Array(256);
  const end = Math.min(sample.length, sampleBytes);
  for (let i = 0; i < end; i++) {
    const folded = foldAscii(sample[i] as number);
    counts[folded] = (counts[folded] as number) + 1;
  }
  let best: { piece: number; anchor: number; count: number } | undefined;
  pieces.forEach((piece, index) => {
    for (let k = 0; k < piece.length; k++) {
      const count = counts[piece[k] as number] as number;
      if (best === undefined || count < best.count) best = { piece: index, anchor: k, count };
    }
  });
  if (best === undefined || best.count > end / bytesPerStop) return undefined;
  const { piece: index, anchor } = best;
  const piece = pieces[index] as Uint8Array;
  const count = (k: number) => counts[piece[k] as number] as number;
  let guard = -1;
  for (let k = 0; k < piece.length; k++) {
    if (k !== anchor && (guard < 0 || count(k) < count(guard))) guard = k;
  }
  return { piece: index, anchor, guard };
}

/**
 * FoldedStreams is where findFolded's two memchr scans stand in one view (the next lower- and
 * upper-case anchor byte at or after where each last looked, -1 for none), so a scan through
 * a view looks at each byte once; `stops` counts the anchor bytes it stopped at.
 */
export interface FoldedStreams {
  view: Uint8Array | undefined;
  lower: number;
  lowerFrom: number;
  upper: number;
  upperFrom: number;
  stops: number;
}

/** newFoldedStreams returns streams that have looked nowhere yet. */
export function newFoldedStreams(): FoldedStreams {
  return { view: undefined, lower: -1, lowerFrom: 0, upper: -1, upperFrom: 0, stops: 0 };
}

/**
 * findFolded returns the first offset at or after `from` and before `end` where `piece`
 * (lowercase ASCII, the one `plan` picked) occurs wholly inside `view`, ASCII case aside, or
 * -1. It runs memchr on the two cases of piece[plan.anchor] and compares the rest byte by byte
 * where one is found. Calls for one view should ask from ascending offsets (each then looks at
 * each byte once); `streams` is reset when the view changes.
 *
 * It runs on scan threads from its source text (scan-pool.ts): it uses nothing but its
 * arguments and globals.
 */
export function findFolded(
  view: Buffer,
  from: number,
  end: number,
  piece: Uint8Array,
  plan: FoldedPlan,
  streams: FoldedStreams,
): number {
  // Its own copy of foldAscii: the threads run this function's text alone.
  const fold = (b: number) => (b >= 65 && b <= 90 ? b + 32 : b);
  const { anchor, guard } = plan;
  const lower = piece[anchor] as number;
  const upper = lower >= 97 && lower <= 122 ? lower - 32 : -1;
  const guardByte = guard < 0 ? 0 : (piece[guard] as number);
  const length = piece.length;
  const last = Math.min(end - 1, view.length - length);
  if (streams.view !== view) {
    streams.view = view;
    streams.lower = -1;
    streams.lowerFrom = view.length + 1;
    streams.upper = -1;
    streams.upperFrom = view.length + 1;
  }
  let at = from + anchor;
  for (;;) {
    // A stream's answer holds for `at` when it looked from at or before it and found nothing
    // or found something at or after it.
    if (streams.lowerFrom > at || (streams.lower >= 0 && streams.lower < at)) {
      streams.lower = view.indexOf(lower, at);
      streams.lowerFrom = at;
    }
    if (upper >= 0 && (streams.upperFrom > at || (streams.upper >= 0 && streams.upper < at))) {
      streams.upper = view.indexOf(upper, at);
      streams.upperFrom = at;
    }
    const l = streams.lower;
    const u = upper < 0 ? -1 : streams.upper;
    const hit = l < 0 ? u : u < 0 ? l : Math.min(l, u);
    if (hit < 0 || hit - anchor > last) return -1;
    streams.stops++;
    const candidate = hit - anchor;
    at = hit + 1;
    if (guard >= 0 && fold(view[candidate + guard] as number) !== guardByte) continue;
    let k = 0;
    while (k < length && fold(view[candidate + k] as number) === piece[k]) k++;
    if (k === length) return candidate;
  }
}
