import type { SpillwayClient } from "@spillway/client";
import type { Command, CommandContext } from "./command.js";
import { expectArgs, stringFlag, wholeFlag } from "./command-line.js";
import { EXIT_OK, usageError } from "./exit-codes.js";

/**
 * copyBytes streams `range` of an output to stdout, each chunk written as it arrives (a view
 * of what the client received, not a copy) and read on only while stdout has room: memory
 * stays bounded whatever the output's size. The stdout writer gathers the chunks that wait
 * behind a write into one writev(2) (fd-writer.ts).
 */
async function copyBytes(
  ctx: CommandContext,
  runId: string,
  handle: string,
  range: { offset?: number; length?: number },
  verify = false,
): Promise<void> {
  for await (const chunk of ctx.client.readBytes(runId, handle, range, {
    signal: ctx.out.signal,
    verify,
  })) {
    await ctx.out.write(chunk);
  }
}

/** catCommand streams a whole output to stdout. */
export const catCommand: Command = {
  name: "cat",
  synopsis: "cat [--verify] <run> <handle>",
  summary: "write an output's bytes to stdout, streamed (--verify: check its sha256 and size)",
  options: { verify: { type: "boolean" } },
  async run(ctx) {
    const [runId = "", handle = ""] = expectArgs("cat", ctx.args, ["<run>", "<handle>"]);
    await copyBytes(ctx, runId, handle, {}, ctx.values.verify === true);
    return EXIT_OK;
  },
};

/**
 * A `-n`/`-c` count: `N`, or `+N` (tail only: from line or byte N on). Both flags at once are a
 * UsageError, as neither is the default then.
 */
function countOf(
  ctx: CommandContext,
  command: string,
): { unit: "lines" | "bytes"; n: number; fromStart: boolean } {
  const lines = stringFlag(ctx.values, "lines");
  const bytes = stringFlag(ctx.values, "bytes");
  if (lines !== undefined && bytes !== undefined)
    throw usageError(`${command}: -n and -c: give one`);
  const unit = bytes === undefined ? "lines" : "bytes";
  const raw = (bytes ?? lines ?? "10").trim();
  const fromStart = command === "tail" && raw.startsWith("+");
  const digits = fromStart ? raw.slice(1) : raw;
  const flag = unit === "lines" ? "n" : "c";
  const n = wholeFlag({ [flag]: digits }, flag, 10);
  return { unit, n, fromStart };
}

const countOptions = {
  lines: { type: "string", short: "n" },
  bytes: { type: "string", short: "c" },
} as const;

/** headCommand writes an output's first lines (default 10) or bytes. */
export const headCommand: Command = {
  name: "head",
  synopsis: "head [-n <lines> | -c <bytes>] <run> <handle>",
  summary: "write an output's first lines (default 10) or bytes",
  options: countOptions,
  async run(ctx) {
    const [runId = "", handle = ""] = expectArgs("head", ctx.args, ["<run>", "<handle>"]);
    const { unit, n } = countOf(ctx, "head");
    if (n === 0) return EXIT_OK;
    if (unit === "bytes") {
      await copyBytes(ctx, runId, handle, { offset: 0, length: n });
      return EXIT_OK;
    }
    // Counted here from the bytes, not from line windows, so binary outputs and lines longer
    // than the server's max_line_chars come out whole, as head(1) writes them. Leaving the loop
    // cancels the read.
    let left = n;
    for await (const chunk of ctx.client.readBytes(runId, handle, {}, { signal: ctx.out.signal })) {
      let end = -1;
      while (left > 0) {
        end = chunk.indexOf(0x0a, end + 1);
        if (end < 0) break;
        left -= 1;
      }
      if (left > 0) {
        await ctx.out.write(chunk);
        continue;
      }
      await ctx.out.write(chunk.subarray(0, end + 1));
      break;
    }
    return EXIT_OK;
  },
};

/**
 * byteOffsetOfLine is where 0-based line `line` starts, as the server's line index says (one
 * one-line window); the payload's size when there is no such line.
 */
async function byteOffsetOfLine(
  client: SpillwayClient,
  runId: string,
  handle: string,
  line: number,
  size: number,
): Promise<number> {
  const window = await client.readToolOutput({
    runId,
    handle,
    omitRendered: true,
    window: { case: "lines", value: { offset: BigInt(line), limit: 1 } },
  });
  for (const frame of window.frames) {
    if (frame.frame.case !== "content" || frame.frame.value.body.case !== "lines") continue;
    const first = frame.frame.value.body.value.lines[0];
    if (first !== undefined) return Number(first.byteOffset);
  }
  return size;
}

/** tailCommand writes an output's last lines (default 10) or bytes, or from line/byte +N on. */
export const tailCommand: Command = {
  name: "tail",
  synopsis: "tail [-n [+]<lines> | -c [+]<bytes>] <run> <handle>",
  summary: "write an output's last lines (default 10) or bytes; +N starts at line or byte N",
  options: countOptions,
  async run(ctx) {
    const [runId = "", handle = ""] = expectArgs("tail", ctx.args, ["<run>", "<handle>"]);
    const { unit, n, fromStart } = countOf(ctx, "tail");
    const record = await ctx.client.stat(runId, handle);
    const size = Number(record.sizeBytes);
    let offset: number;
    if (unit === "bytes") {
      offset = fromStart ? Math.min(size, Math.max(0, n - 1)) : Math.max(0, size - n);
    } else {
      if (record.binary) {
        throw usageError(`tail -n: ${handle} is binary and has no line index; use tail -c`);
      }
      const lines = Number(record.lineCount);
      const first = fromStart ? Math.max(0, n - 1) : Math.max(0, lines - n);
      // The server's line index finds the line's byte offset; the bytes from there are then
      // copied whole, however long the lines.
      offset = first === 0 ? 0 : await byteOffsetOfLine(ctx.client, runId, handle, first, size);
    }
    if (offset < size) await copyBytes(ctx, runId, handle, { offset });
    return EXIT_OK;
  },
};
