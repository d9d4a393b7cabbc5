import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { constants as osConstants } from "node:os";

/** PackageCommand names the executable of a client package that a `spillway` command runs. */
export interface PackageCommand {
  /** The command as the user typed it, e.g. `mcp` or `cat`. */
  readonly command: string;
  /** The package holding the executable, e.g. `@spillway/mcp`. */
  readonly packageName: string;
  /** The executable's file under the package's `bin/`, without `.js`, e.g. `spillway-mcp`. */
  readonly bin: string;
  /** The doc that says how to install the package, e.g. `docs/mcp.md`. */
  readonly doc: string;
}

/**
 * MCP_COMMANDS are `spillway mcp` and `spillway mcp-proxy`: `spillway-mcp` and
 * `spillway-mcp-proxy` of @spillway/mcp.
 */
export const MCP_COMMANDS: readonly PackageCommand[] = (["mcp", "mcp-proxy"] as const).map(
  (command) => ({
    command,
    packageName: "@spillway/mcp",
    bin: `spillway-${command}`,
    doc: "docs/mcp.md",
  }),
);

/**
 * CLIENT_COMMAND_NAMES are the commands `spillway` hands to `spillway-cli` of @spillway/cli
 * with their arguments (`spillway cat <run> <handle>` is `spillway-cli cat <run> <handle>`);
 * test/cli.test.ts checks they are that package's commands.
 */
export const CLIENT_COMMAND_NAMES: readonly string[] = [
  "runs",
  "ls",
  "stat",
  "cat",
  "head",
  "tail",
  "grep",
  "put",
  "rm",
  "fork",
  "merge",
  "ttl",
];

/**
 * spillway-cli's global flags, which its command line takes before the command's name too:
 * those that take a value, and those that do not. test/cli.test.ts runs them through `spillway`.
 */
const CLIENT_VALUE_FLAGS: readonly string[] = [
  "url",
  "token",
  "token-file",
  "tls-ca",
  "tls-cert",
  "tls-key",
];
const CLIENT_SWITCH_FLAGS: readonly string[] = ["json"];

/**
 * clientCommandAt returns the index of a client command's name in `argv` when only
 * spillway-cli's global flags (and their values) come before it, as in `spillway --url <url>
 * ls run`; -1 otherwise, so `spillway --token-file <path> serve` stays the server's.
 */
export function clientCommandAt(argv: readonly string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--")) return CLIENT_COMMAND_NAMES.includes(arg) ? i : -1;
    const [name = "", value] = arg.slice(2).split("=", 2);
    if (CLIENT_VALUE_FLAGS.includes(name)) {
      if (value === undefined) i += 1;
    } else if (!CLIENT_SWITCH_FLAGS.includes(name) || value !== undefined) {
      return -1;
    }
  }
  return -1;
}

/** packageCommandFor finds the package command `command` names, if any. */
export function packageCommandFor(command: string | undefined): PackageCommand | undefined {
  if (command === undefined) return undefined;
  const mcp = MCP_COMMANDS.find((c) => c.command === command);
  if (mcp !== undefined) return mcp;
  if (!CLIENT_COMMAND_NAMES.includes(command)) return undefined;
  return { command, packageName: "@spillway/cli", bin: "spillway-cli", doc: "docs/cli.md" };
}

/**
 * runPackageCommand runs a command that belongs to a client package (the MCP server and proxy,
 * the client CLI) as that package's executable, in a process of its own with this one's stdio,
 * arguments and environment, forwarding SIGINT, SIGTERM and SIGHUP, and takes on its exit
 * code. Those are clients of Spillway, so they ship in separate packages and never load into
 * the server's process (biome.json keeps the server from importing any client package);
 * without the package installed beside the server the command says so and exits 2. `args`
 * are what the executable gets: for the client CLI the command's name comes first.
 */
export function runPackageCommand(target: PackageCommand, args: readonly string[]): void {
  let bin: string;
  try {
    bin = createRequire(import.meta.url)
      .resolve(`${target.packageName}/package.json`)
      .replace(/package\.json$/, `bin/${target.bin}.js`);
  } catch {
    process.stderr.write(
      `spillway: ${target.command} runs ${target.bin} of the ${target.packageName} package, which is not installed beside the server; install it (${target.doc})\n`,
    );
    process.exitCode = 2;
    return;
  }
  const child = spawn(process.execPath, [bin, ...args], { stdio: "inherit" });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => child.kill(signal));
  }
  child.on("exit", (code, signal) => {
    process.exitCode = code ?? (signal === null ? 1 : 128 + (osConstants.signals[signal] ?? 0));
  });
}
