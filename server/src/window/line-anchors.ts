/** LineAnchor is a line whose start offset is known without scanning for it. */
export interface LineAnchor {
  /** 0-based line number. */
  readonly line: number;
  /** Byte offset where the line starts. */
  readonly offset: number;
}

/**
 * LineAnchors walks a payload's line index forward, so a scan that skips ahead can learn how
 * many lines it skipped by counting only from the last indexed line, not from where it was.
 */
export interface LineAnchors {
  /** Loads index entries until one past `offset` is known (or the index ends). */
  reach(offset: number): Promise<void>;
  /**
   * The indexed line starting at or before `offset` with the greatest offset, among the
   * entries loaded; undefined when none is. Calls must not go backwards in `offset`.
   */
  floor(offset: number): LineAnchor | undefined;
  /** The indexed line right before the last floor found; undefined when it is line 0 or none was. */
  previous(): LineAnchor | undefined;
  /**
   * The indexed line right after the last floor found, among the entries loaded (reach past
   * it first); undefined when none is loaded.
   */
  next(): LineAnchor | undefined;
  /** Stops reading the index (a scan that ended early must not keep it open). */
  close(): Promise<void>;
}

/**
 * createLineAnchors returns anchors over index entries streamed in order: `offsets` yields the
 * start offsets of lines 0, stride, 2·stride, … in batches. Memory holds the batches not yet
 * passed, so a forward scan keeps about one batch whatever the index size.
 */
export function createLineAnchors(
  stride: number,
  offsets: AsyncIterable<Float64Array>,
): LineAnchors {
  const iterator = offsets[Symbol.asyncIterator]();
  let batch: Float64Array = new Float64Array(0);
  // Entry number of batch[0], and the position inside batch of the current floor.
  let batchFirst = 0;
  let at = -1;
  let pending: Float64Array[] = [];
  let done = false;
  let before: LineAnchor | undefined;
  const here = (): LineAnchor | undefined => {
    const found = batch[at];
    return found === undefined ? undefined : { line: (batchFirst + at) * stride, offset: found };
  };
  const last = (): number => {
    const tail = pending.at(-1) ?? batch;
    return tail.length > 0 ? (tail[tail.length - 1] ?? -1) : -1;
  };
  return {
    async reach(offset) {
      while (!done && last() <= offset) {
        const next = await iterator.next();
        if (next.done) done = true;
        else if (next.value.length > 0) pending.push(next.value);
      }
    },
    floor(offset) {
      for (;;) {
        const following = batch[at + 1];
        if (following !== undefined) {
          if (following > offset) break;
          before = here();
          at++;
          continue;
        }
        const next = pending[0];
        if (next === undefined || (next[0] ?? Number.POSITIVE_INFINITY) > offset) break;
        pending = pending.slice(1);
        before = here();
        batchFirst += batch.length;
        batch = next;
        at = 0;
      }
      return here();
    },
    previous: () => before,
    next() {
      const following = batch[at + 1];
      if (following !== undefined) {
        return { line: (batchFirst + at + 1) * stride, offset: following };
      }
      const first = pending[0]?.[0];
      return first === undefined
        ? undefined
        : { line: (batchFirst + batch.length) * stride, offset: first };
    },
    async close() {
      done = true;
      await iterator.return?.();
    },
  };
}
