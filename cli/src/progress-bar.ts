import { formatBytes, formatSeconds } from "./format.js";

/** ProgressBar draws one transfer's progress on a terminal line. */
export interface ProgressBar {
  /** Counts `bytes` more as transferred; redraws at most every `intervalMs`. */
  advance(bytes: number): void;
  /** Draws the final state and ends the line. */
  finish(): void;
}

/** ProgressBarOptions configure createProgressBar. */
export interface ProgressBarOptions {
  /** Where the bar is drawn: a terminal (stderr). */
  readonly stream: NodeJS.WritableStream & { columns?: number };
  /** What is transferred, shown first on the line. */
  readonly label: string;
  /** Bytes in all, when known: then the bar, the percentage and the ETA are shown. */
  readonly total: number | undefined;
  /** Least time between two redraws; default 100 ms. */
  readonly intervalMs?: number;
  /** The clock, in milliseconds. */
  readonly now?: () => number;
}

/**
 * renderProgress is one state of the bar, fitted to `columns`:
 * `label [#####-----]  45%  460 MiB / 1.00 GiB  112 MiB/s  ETA 5s` with a known total,
 * `label  460 MiB  112 MiB/s` without one.
 */
export function renderProgress(
  label: string,
  done: number,
  total: number | undefined,
  elapsedMs: number,
  columns: number,
): string {
  const rate = elapsedMs > 0 ? (done * 1000) / elapsedMs : 0;
  const rateText = `${formatBytes(Math.round(rate))}/s`;
  if (total === undefined) {
    return `${label}  ${formatBytes(done)}  ${rateText}`.slice(0, columns);
  }
  const fraction = total === 0 ? 1 : Math.min(1, done / total);
  const eta = rate > 0 ? formatSeconds((total - done) / rate) : "--";
  const tail = `${String(Math.floor(fraction * 100)).padStart(3)}%  ${formatBytes(done)} / ${formatBytes(total)}  ${rateText}  ETA ${eta}`;
  const shortLabel = label.length > 24 ? `…${label.slice(-23)}` : label;
  const barWidth = Math.max(10, Math.min(40, columns - shortLabel.length - tail.length - 6));
  const filled = Math.round(fraction * barWidth);
  return `${shortLabel} [${"#".repeat(filled)}${"-".repeat(barWidth - filled)}] ${tail}`.slice(
    0,
    columns,
  );
}

/**
 * createProgressBar draws a transfer's bytes, rate and (with a known total) bar and ETA on one
 * line of a terminal, redrawn in place with a carriage return. Only for a TTY: the caller
 * shows no bar when the stream is not one, so logs and pipes stay quiet.
 */
export function createProgressBar(opts: ProgressBarOptions): ProgressBar {
  const now = opts.now ?? Date.now;
  const intervalMs = opts.intervalMs ?? 100;
  const started = now();
  let done = 0;
  let drawn = Number.NEGATIVE_INFINITY;
  const draw = () => {
    drawn = now();
    // A terminal that reports no size (0 columns, as under script(1)) gets 80.
    const columns =
      opts.stream.columns !== undefined && opts.stream.columns > 0 ? opts.stream.columns : 80;
    const line = renderProgress(opts.label, done, opts.total, drawn - started, columns);
    // \x1b[K clears what a longer earlier line left to the right.
    opts.stream.write(`\r${line}\x1b[K`);
  };
  return {
    advance(bytes) {
      done += bytes;
      if (now() - drawn >= intervalMs) draw();
    },
    finish() {
      draw();
      opts.stream.write("\n");
    },
  };
}
