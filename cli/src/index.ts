/**
 * The Spillway command line as a library: runCli runs one command line, COMMAND_NAMES are the
 * commands (the server's `spillway <command>` hands these to `spillway-cli`), and the exit
 * status mapping.
 */
export type { CliIo, Command, CommandContext } from "./command.js";
export { COMMAND_NAMES, COMMANDS } from "./commands.js";
export {
  EXIT_GRPC_BASE,
  EXIT_LOCAL,
  EXIT_NO_MATCH,
  EXIT_OK,
  EXIT_USAGE,
  exitCodeOf,
  exitCodeOfCode,
} from "./exit-codes.js";
export { formatBytes, parseDuration } from "./format.js";
export { runMain } from "./main.js";
export { renderProgress } from "./progress-bar.js";
export { runCli } from "./run-cli.js";
export { cliUsage } from "./usage.js";
