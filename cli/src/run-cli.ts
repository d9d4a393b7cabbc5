import { ConnectError } from "@connectrpc/connect";
import { statusName } from "@spillway/wire";
import type { CliIo } from "./command.js";
import { parseCommandLine } from "./command-line.js";
import { COMMANDS } from "./commands.js";
import { clientOf, connectionOf } from "./connection.js";
import { EXIT_OK, EXIT_USAGE, exitCodeOf, isUsageError } from "./exit-codes.js";
import { visible } from "./format.js";
import { createOutputSink } from "./output-sink.js";
import { cliUsage } from "./usage.js";

/**
 * runCli runs one `spillway-cli` command line and resolves with its exit status; it never
 * throws. Results go to `io.stdout`, diagnostics to `io.stderr` as `spillway-cli: ...`: a
 * usage error with a hint (exit 2), a refused call with its gRPC code name (exit 10 + code),
 * a local failure (exit 3). A reader that closes stdout early (`| head`) ends the command
 * quietly with exit 0.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const out = createOutputSink(io.stdout);
  try {
    const parsed = parseCommandLine(argv, (name) => commandNamed(name)?.options ?? {});
    if (parsed.values.help === true || parsed.command === "help") {
      io.stdout.write(cliUsage);
      return EXIT_OK;
    }
    if (parsed.command === undefined) {
      io.stderr.write(`spillway-cli: no command\n${cliUsage}`);
      return EXIT_USAGE;
    }
    const command = commandNamed(parsed.command);
    if (command === undefined) {
      io.stderr.write(`spillway-cli: unknown command "${visible(parsed.command)}"\n${cliUsage}`);
      return EXIT_USAGE;
    }
    const client = clientOf(connectionOf(parsed.values, io.env));
    return await command.run({
      client,
      args: parsed.positionals,
      values: parsed.values,
      json: parsed.values.json === true,
      out,
      io,
    });
  } catch (err) {
    if (out.readerGone()) return EXIT_OK;
    // Line by line: a message's own newlines stay, anything else that could drive the terminal
    // (from an argument or a server's message) is shown escaped.
    const message = describe(err)
      .split("\n")
      .map((line) => visible(line, true))
      .join("\n");
    io.stderr.write(`spillway-cli: ${message}\n`);
    if (isUsageError(err)) io.stderr.write("Try spillway-cli --help.\n");
    return exitCodeOf(err);
  }
}

function commandNamed(name: string) {
  return COMMANDS.find((c) => c.name === name);
}

function describe(err: unknown): string {
  if (isUsageError(err)) return err.usageError;
  if (err instanceof ConnectError) return `${statusName(err.code)}: ${err.rawMessage}`;
  return err instanceof Error ? err.message : String(err);
}
