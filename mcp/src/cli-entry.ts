type NotRun = "help" | { readonly usageError: string };

/**
 * runnableOrExit settles the command lines a CLI does not run: `help` prints `usage` to
 * stdout; a usage error prints it with the usage to stderr and sets exit code 2. Both return
 * undefined; anything else is returned for the CLI to run.
 */
export function runnableOrExit<P>(
  bin: string,
  usage: string,
  parsed: P,
): Exclude<P, NotRun> | undefined {
  if (parsed === "help") {
    process.stdout.write(usage);
    return undefined;
  }
  if (typeof parsed === "object" && parsed !== null && "usageError" in parsed) {
    process.stderr.write(`${bin}: ${(parsed as { usageError: string }).usageError}\n${usage}`);
    process.exitCode = 2;
    return undefined;
  }
  return parsed as Exclude<P, NotRun>;
}

/** runBin runs `run` on process.argv; a fault is printed as `<bin>: <message>` with exit 1. */
export function runBin(bin: string, run: (argv: readonly string[]) => Promise<void>): void {
  run(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`${bin}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
