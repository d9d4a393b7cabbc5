import type { Command } from "./command.js";
import { grepCommand } from "./grep-command.js";
import { lsCommand, runsCommand, statCommand } from "./list-commands.js";
import { putCommand } from "./put-command.js";
import { catCommand, headCommand, tailCommand } from "./read-commands.js";
import { forkCommand, mergeCommand, rmCommand, ttlCommand } from "./run-commands.js";

/** COMMANDS are every `spillway-cli` command, in the order the usage lists them. */
export const COMMANDS: readonly Command[] = [
  runsCommand,
  lsCommand,
  statCommand,
  catCommand,
  headCommand,
  tailCommand,
  grepCommand,
  putCommand,
  rmCommand,
  forkCommand,
  mergeCommand,
  ttlCommand,
];

/** COMMAND_NAMES are the commands' names: `spillway <name>` hands each to `spillway-cli`. */
export const COMMAND_NAMES: readonly string[] = COMMANDS.map((c) => c.name);
