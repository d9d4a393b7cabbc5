import { parseDuration, parseSize, parseWholeNumber } from "./size-option.js";

/** A whole-number option's bounds, both inclusive. */
export interface OptionRange {
  readonly min?: number;
  readonly max?: number;
}

/** OptionReader reads the CLI's flags, each from its option or else its environment variable. */
export interface OptionReader<F extends string> {
  /** The flag's text as given, or undefined when neither the option nor the variable is set. */
  text(flag: F): string | undefined;
  /** Whether the flag was given on the command line (not only in the environment). */
  given(flag: F): boolean;
  /**
   * How messages name the flag: `--flag` when it was given on the command line, `--flag
   * (VARIABLE)` when it came from the environment (or when it is not set at all).
   */
  name(flag: F): string;
  /** A whole number: decimal digits only. */
  int(flag: F, range?: OptionRange): number | undefined;
  /** A byte count: a whole number or a number with a unit ({@link parseSize}). */
  bytes(flag: F, range?: OptionRange): number | undefined;
  /** A duration in milliseconds: a plain number is ms, or a number with a unit ({@link parseDuration}). */
  ms(flag: F, range?: OptionRange): number | undefined;
  /**
   * A duration a timer waits: as `ms`, and at most {@link maxTimerMs} (about 24.8 days), the
   * longest a Node.js timer waits; a longer one would fire after 1 ms, every time.
   */
  timer(flag: F, range?: OptionRange): number | undefined;
  /** One of `choices`, spelled exactly. */
  oneOf<C extends string>(flag: F, choices: readonly C[]): C | undefined;
}

/** maxTimerMs is the longest delay a Node.js timer takes, 2^31 - 1 ms; longer ones fire at once. */
export const maxTimerMs = 2 ** 31 - 1;

/**
 * createOptionReader reads flags from parsed command-line `values` and, for a flag not given
 * there, from the environment variable `variables` names for it. Every number is checked when
 * it is read, and a bad one throws an Error naming the flag (and the variable it came from)
 * and the value given: `Number` would read "" or " " as 0, which turned a limit off when a
 * template left a variable empty.
 */
export function createOptionReader<F extends string>(
  values: Readonly<Record<string, unknown>>,
  variables: Readonly<Record<F, string>>,
  env: NodeJS.ProcessEnv = process.env,
): OptionReader<F> {
  const given = (flag: F): string | undefined => {
    const value = values[flag];
    return typeof value === "string" ? value : undefined;
  };
  const text = (flag: F): string | undefined => given(flag) ?? env[variables[flag]];
  const name = (flag: F): string =>
    given(flag) === undefined ? `--${flag} (${variables[flag]})` : `--${flag}`;
  const number =
    (parse: (raw: string) => number) =>
    (flag: F, range: OptionRange = {}): number | undefined => {
      const raw = text(flag);
      if (raw === undefined) return undefined;
      let n: number;
      try {
        n = parse(raw);
      } catch (err) {
        throw new Error(`${name(flag)}: ${(err as Error).message}, got ${JSON.stringify(raw)}`);
      }
      if (range.min !== undefined && n < range.min) {
        throw new Error(`${name(flag)}: must be at least ${range.min}, got ${JSON.stringify(raw)}`);
      }
      if (range.max !== undefined && n > range.max) {
        throw new Error(`${name(flag)}: must be at most ${range.max}, got ${JSON.stringify(raw)}`);
      }
      return n;
    };
  return {
    text,
    given: (flag) => given(flag) !== undefined,
    name,
    int: number(parseWholeNumber),
    bytes: number(parseSize),
    ms: number(parseDuration),
    timer(flag: F, range: OptionRange = {}): number | undefined {
      const n = number(parseDuration)(flag, range);
      if (n !== undefined && n > maxTimerMs) {
        throw new Error(
          `${name(flag)}: must be at most ${maxTimerMs} ms (24.8 days, the longest a timer waits), got ${JSON.stringify(text(flag))}`,
        );
      }
      return n;
    },
    oneOf<C extends string>(flag: F, choices: readonly C[]): C | undefined {
      const raw = text(flag);
      if (raw === undefined || (choices as readonly string[]).includes(raw)) {
        return raw as C | undefined;
      }
      throw new Error(
        `${name(flag)}: expected one of ${choices.join(", ")}, got ${JSON.stringify(raw)}`,
      );
    },
  };
}
