import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

type ParsedFlags = Record<string, string | boolean | undefined>;

/** CliFlags reads the parsed flags of one command line over the environment. */
export interface CliFlags {
  /** The flag's value, else the variable's when non-empty, else undefined. */
  str(flag: string, variable: string): string | undefined;
  /**
   * A whole number from the flag or the variable (else `fallback`) between `min` and `max`
   * (`Number.MAX_SAFE_INTEGER` for no bound), or the usage error naming the flag.
   */
  whole(
    flag: string,
    variable: string,
    fallback: number,
    min: number,
    max: number,
  ): number | string;
  /**
   * The bearer token: the first line of `--token-file`, else `SPILLWAY_TOKEN`; an unreadable
   * file is a usage error `{ usageError }`.
   */
  token(): string | undefined | { usageError: string };
  /** True when `-h` or `--help` was given. */
  readonly help: boolean;
}

/**
 * parseCliFlags parses `argv` with the given string flags plus `--token-file` and `-h/--help`.
 * It never throws for bad input: a flag node:util refuses comes back as `{ usageError }`.
 */
export function parseCliFlags(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  flags: readonly string[],
): CliFlags | { usageError: string } {
  let values: ParsedFlags;
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        ...Object.fromEntries(flags.map((f) => [f, { type: "string" as const }])),
        "token-file": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (err) {
    return { usageError: (err as Error).message };
  }
  const str = (flag: string, variable: string): string | undefined => {
    const v = values[flag];
    return typeof v === "string" ? v : env[variable] || undefined;
  };
  return {
    help: values.help === true,
    str,
    whole: (flag, variable, fallback, min, max) => {
      const raw = str(flag, variable);
      if (raw === undefined) return fallback;
      const n = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
      if (Number.isSafeInteger(n) && n >= min && n <= max) return n;
      const expected =
        max === Number.MAX_SAFE_INTEGER ? `a whole number above ${min - 1}` : `${min} to ${max}`;
      return `--${flag}: expected ${expected}, got ${raw}`;
    },
    token: () => {
      const tokenFile = values["token-file"];
      if (typeof tokenFile !== "string") return env.SPILLWAY_TOKEN || undefined;
      try {
        return readFileSync(tokenFile, "utf8").split("\n")[0]?.trim() || undefined;
      } catch (err) {
        return { usageError: `--token-file: ${(err as Error).message}` };
      }
    },
  };
}
