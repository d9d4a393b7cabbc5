import { type ParseArgsConfig, parseArgs } from "node:util";
import { usageError } from "./exit-codes.js";

type Options = NonNullable<ParseArgsConfig["options"]>;

/** GLOBAL_OPTIONS are the flags every command takes, before or after the command's name. */
const GLOBAL_OPTIONS = {
  url: { type: "string" },
  token: { type: "string" },
  "token-file": { type: "string" },
  "tls-ca": { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

/** ParsedCommandLine is a command line split into the command, its flags and its arguments. */
export interface ParsedCommandLine {
  /** The command's name; undefined when none was given. */
  readonly command: string | undefined;
  /** Global and command flags by name. */
  readonly values: Record<string, string | boolean | undefined>;
  /** The arguments after the command's name. */
  readonly positionals: readonly string[];
}

/**
 * findCommand returns the index of the command's name in `argv`: the first argument that is
 * neither a global flag nor a global flag's value. -1 when there is none.
 */
export function findCommand(argv: readonly string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "--") return i + 1 < argv.length ? i + 1 : -1;
    if (arg.startsWith("--")) {
      const name = arg.slice(2).split("=")[0] ?? "";
      const option = (GLOBAL_OPTIONS as Options)[name];
      if (option?.type === "string" && !arg.includes("=")) i += 1;
      continue;
    }
    if (arg.startsWith("-") && arg !== "-") continue;
    return i;
  }
  return -1;
}

/**
 * parseCommandLine parses `argv` with the global flags plus `commandOptions(command)`, global
 * flags allowed anywhere. An unknown flag or a missing value is thrown as a UsageError.
 */
export function parseCommandLine(
  argv: readonly string[],
  commandOptions: (command: string) => Options,
): ParsedCommandLine {
  const at = findCommand(argv);
  const command = at < 0 ? undefined : argv[at];
  const rest = at < 0 ? [...argv] : [...argv.slice(0, at), ...argv.slice(at + 1)];
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      allowPositionals: true,
      strict: true,
      options: { ...(command === undefined ? {} : commandOptions(command)), ...GLOBAL_OPTIONS },
    });
    return { command, values: values as ParsedCommandLine["values"], positionals };
  } catch (err) {
    throw usageError((err as Error).message);
  }
}

/**
 * wholeFlag reads a whole-number flag (`-n 20`); `fallback` when absent. Anything else is a
 * UsageError naming the flag.
 */
export function wholeFlag(
  values: ParsedCommandLine["values"],
  flag: string,
  fallback: number,
  min = 0,
): number {
  const raw = values[flag];
  if (raw === undefined) return fallback;
  const n = typeof raw === "string" && /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    throw usageError(
      `-${flag.length === 1 ? "" : "-"}${flag}: expected a whole number${min > 0 ? ` of at least ${min}` : ""}, got ${JSON.stringify(raw)}`,
    );
  }
  return n;
}

/** stringFlag reads a string flag; undefined when absent. */
export function stringFlag(values: ParsedCommandLine["values"], flag: string): string | undefined {
  const raw = values[flag];
  return typeof raw === "string" ? raw : undefined;
}

/**
 * expectArgs checks a command's arguments against their names (`<run>`, `<handle>`; a name in
 * brackets is optional) and returns them; a missing or extra one is a UsageError.
 */
export function expectArgs(
  command: string,
  positionals: readonly string[],
  names: readonly string[],
): string[] {
  const required = names.filter((n) => !n.startsWith("[")).length;
  if (positionals.length < required || positionals.length > names.length) {
    throw usageError(
      `${command}: expected ${names.join(" ")}, got ${positionals.length === 0 ? "nothing" : positionals.map((p) => JSON.stringify(p)).join(" ")}`,
    );
  }
  return [...positionals];
}
