#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { loadCases } from "./case.js";
import { formatResult, formatSummary } from "./report.js";
import { type Actor, runConformance } from "./runner.js";
import { loadWindowVectors, vectorCases } from "./window-vectors.js";

/** usage is the CLI's help text. */
export const usage = `usage: spillway-conformance --target <url> [options]
       spillway-conformance --help

  --target <url>           the Spillway server, e.g. http://127.0.0.1:50051
  --token NAME=TOKEN:TENANT
                           an actor (repeatable): A is the main tenant, B a second one that
                           enables the multi-tenant cases; none: dev mode, A is tenant "dev"
  --features auto|a,b,…    declared features (default auto: GetServerInfo.features)
  --run <regex>            run only cases whose name matches
  --skip <regex>           leave out cases whose name matches
  --known-failing <file>   JSON list of case names known to fail (a listed case that passes fails)
  --cases <dir>            case files (default: the bundled conformance/cases)
  --vectors <file>         window vectors (default: the bundled conformance/window-vectors.json)
  --concurrency <n>        cases run at once (default 4)
  --timeout-ms <n>         deadline of each call (default 30000)
`;

/** CliOptions is the parsed command line. */
export interface CliOptions {
  readonly target: string;
  readonly actors: readonly Actor[];
  readonly features: readonly string[] | "auto";
  readonly run?: RegExp;
  readonly skip?: RegExp;
  readonly knownFailingFile?: string;
  readonly casesDir: string;
  readonly vectorsFile: string;
  readonly concurrency: number;
  readonly timeoutMs: number;
}

function bundled(relative: string): string {
  // Beside src/ (run from source) and dist/ (compiled) alike: both sit one level down.
  return fileURLToPath(new URL(`../${relative}`, import.meta.url));
}

function invalid(message: string): ConnectError {
  return new ConnectError(message, Code.InvalidArgument);
}

/** parseActor parses `NAME=TOKEN:TENANT` (the token may contain `:`; the tenant may not). */
export function parseActor(spec: string): Actor {
  const eq = spec.indexOf("=");
  const colon = spec.lastIndexOf(":");
  if (eq <= 0 || colon <= eq + 1 || colon === spec.length - 1) {
    throw invalid(`--token ${spec}: expected NAME=TOKEN:TENANT`);
  }
  return {
    name: spec.slice(0, eq),
    token: spec.slice(eq + 1, colon),
    tenant: spec.slice(colon + 1),
  };
}

function positiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw invalid(`${flag}: expected a positive integer`);
  return n;
}

/** The command line's options, as node:util's parseArgs reads them. */
const cliOptions = {
  target: { type: "string" },
  token: { type: "string", multiple: true },
  features: { type: "string" },
  run: { type: "string" },
  skip: { type: "string" },
  "known-failing": { type: "string" },
  cases: { type: "string" },
  vectors: { type: "string" },
  concurrency: { type: "string" },
  "timeout-ms": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** parseCliArgs parses the command line; it throws INVALID_ARGUMENT on a bad or missing flag. */
export function parseCliArgs(argv: readonly string[]): CliOptions {
  const { values } = parseArgs({ args: [...argv], options: cliOptions, strict: true });
  if (values.target === undefined) throw invalid("--target is required");
  const actors = (values.token ?? []).map(parseActor);
  if (actors.length > 0 && !actors.some((a) => a.name === "A")) {
    throw invalid("--token: actor A is required when tokens are given");
  }
  const features =
    values.features === undefined || values.features === "auto"
      ? "auto"
      : values.features
          .split(",")
          .map((f) => f.trim())
          .filter((f) => f !== "");
  return {
    target: values.target,
    actors: actors.length > 0 ? actors : [{ name: "A", tenant: "dev" }],
    features,
    ...(values.run === undefined ? {} : { run: new RegExp(values.run) }),
    ...(values.skip === undefined ? {} : { skip: new RegExp(values.skip) }),
    ...(values["known-failing"] === undefined ? {} : { knownFailingFile: values["known-failing"] }),
    casesDir: values.cases ?? bundled("cases"),
    vectorsFile: values.vectors ?? bundled("window-vectors.json"),
    concurrency: positiveInt("--concurrency", values.concurrency, 4),
    timeoutMs: positiveInt("--timeout-ms", values["timeout-ms"], 30_000),
  };
}

/** loadKnownFailing reads a JSON list of case names. */
export async function loadKnownFailing(file: string): Promise<string[]> {
  const parsed: unknown = JSON.parse(await readFile(file, "utf8"));
  if (!Array.isArray(parsed) || !parsed.every((n) => typeof n === "string")) {
    throw invalid(`${file}: expected a JSON array of case names`);
  }
  return parsed;
}

/**
 * runCli runs the suite as the command line asks, writing one line per case and the closing
 * `N passed, N failed, N skipped` line to out; it resolves to the exit code: 0 when no case
 * failed, 1 when one did, 2 on a usage error. With `--help` (or `-h`) it writes the usage and
 * resolves to 0, whatever else the line holds.
 */
export async function runCli(
  argv: readonly string[],
  out: (line: string) => void,
): Promise<number> {
  // Read leniently, so that a request for help is answered even beside a wrong flag.
  if (parseArgs({ args: [...argv], options: cliOptions, strict: false }).values.help === true) {
    out(usage);
    return 0;
  }
  let opts: CliOptions;
  try {
    opts = parseCliArgs(argv);
  } catch (err) {
    out(`${ConnectError.from(err).rawMessage}\n\n${usage}`);
    return 2;
  }
  const vectors = await loadWindowVectors(opts.vectorsFile);
  const cases = [...(await loadCases(opts.casesDir)), ...vectorCases(vectors)];
  const report = await runConformance({
    target: opts.target,
    cases,
    actors: opts.actors,
    features: opts.features,
    ...(opts.run === undefined ? {} : { run: opts.run }),
    ...(opts.skip === undefined ? {} : { skip: opts.skip }),
    knownFailing:
      opts.knownFailingFile === undefined ? [] : await loadKnownFailing(opts.knownFailingFile),
    vectorCaps: vectors.caps,
    concurrency: opts.concurrency,
    timeoutMs: opts.timeoutMs,
    onResult: (r) => out(formatResult(r)),
  });
  out(formatSummary(report));
  return report.failed > 0 ? 1 : 0;
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

/**
 * runMain runs the CLI on the process's arguments and sets the exit code: 0 when every case
 * passed, 1 when one failed or the run could not start, 2 for bad arguments.
 */
export function runMain(): void {
  runCli(process.argv.slice(2), (line) => process.stdout.write(`${line}\n`)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`spillway-conformance: ${ConnectError.from(err).message}\n`);
      process.exitCode = 1;
    },
  );
}

if (isMain()) runMain();
