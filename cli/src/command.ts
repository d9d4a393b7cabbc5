import type { ParseArgsConfig } from "node:util";
import type { SpillwayClient } from "@spillway/client";
import type { ParsedCommandLine } from "./command-line.js";
import { jsonLine } from "./format.js";
import type { OutputSink } from "./output-sink.js";

/** CliIo is the process the CLI runs in: its streams and environment. */
export interface CliIo {
  readonly stdin: NodeJS.ReadableStream;
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  readonly env: NodeJS.ProcessEnv;
}

/** CommandContext is what one command runs with. */
export interface CommandContext {
  /** The client, connected as the global flags say. */
  readonly client: SpillwayClient;
  /** The command's arguments. */
  readonly args: readonly string[];
  /** Global and command flags. */
  readonly values: ParsedCommandLine["values"];
  /** `--json`: print the JSON shape the docs give instead of text for people. */
  readonly json: boolean;
  /** stdout, with backpressure and a reader that may leave. */
  readonly out: OutputSink;
  readonly io: CliIo;
}

/** Command is one `spillway-cli` command. */
export interface Command {
  readonly name: string;
  /** Its arguments and flags, for the usage text. */
  readonly synopsis: string;
  /** One line saying what it does. */
  readonly summary: string;
  /** Its own flags (the global ones are added). */
  readonly options: NonNullable<ParseArgsConfig["options"]>;
  /** Runs it and resolves with the exit status; a failure is thrown. */
  run(ctx: CommandContext): Promise<number>;
}

/** printJson writes `value` as one line of JSON, every control character escaped (jsonLine). */
export function printJson(ctx: CommandContext, value: unknown): Promise<void> {
  return ctx.out.write(jsonLine(value));
}
