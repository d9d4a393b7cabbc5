import type { SearchCursor } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { type Command, printJson } from "./command.js";
import { expectArgs, wholeFlag } from "./command-line.js";
import { EXIT_NO_MATCH, EXIT_OK, usageError } from "./exit-codes.js";
import { visible } from "./format.js";

/** The server's bound on SearchWindow.context_lines. */
const MAX_CONTEXT = 20;
/** Matches asked for per window; the server may cap it lower, and paging carries on. */
const MATCHES_PER_WINDOW = 1000;

/** A line as grep prints it: number, text, and whether it matched. */
interface PrintedLine {
  readonly number: number;
  readonly text: string;
  readonly matched: boolean;
}

/**
 * grepCommand searches an output's lines with the server's search windows, paging through
 * every match (one pass over the payload, resumed at each window's cursor), and prints them
 * as grep(1) does: `-n` numbers, `-A/-B/-C` context with `--` between groups that do not
 * touch, `-c` a count, `-m` a limit, exit 1 when nothing matched.
 */
export const grepCommand: Command = {
  name: "grep",
  synopsis:
    "grep [-F | -E] [-i] [-n] [-c] [-m <n>] [-A <n>] [-B <n>] [-C <n>] <pattern> <run> <handle>",
  summary: "print an output's lines matching a literal (-F, default) or RE2 regex (-E)",
  options: {
    "fixed-strings": { type: "boolean", short: "F" },
    "extended-regexp": { type: "boolean", short: "E" },
    "ignore-case": { type: "boolean", short: "i" },
    "line-number": { type: "boolean", short: "n" },
    count: { type: "boolean", short: "c" },
    "max-count": { type: "string", short: "m" },
    "after-context": { type: "string", short: "A" },
    "before-context": { type: "string", short: "B" },
    context: { type: "string", short: "C" },
  },
  async run(ctx) {
    const [pattern = "", runId = "", handle = ""] = expectArgs("grep", ctx.args, [
      "<pattern>",
      "<run>",
      "<handle>",
    ]);
    const v = ctx.values;
    if (v["fixed-strings"] === true && v["extended-regexp"] === true) {
      throw usageError("grep: -F and -E: give one");
    }
    if (pattern === "") throw usageError("grep: the pattern must not be empty");
    const both = wholeFlag(v, "context", 0);
    const after = wholeFlag(v, "after-context", both);
    const before = wholeFlag(v, "before-context", both);
    if (after > MAX_CONTEXT || before > MAX_CONTEXT) {
      throw usageError(`grep: context is at most ${MAX_CONTEXT} lines (the server's bound)`);
    }
    // GNU grep separates groups with `--` whenever a context flag is given, even -A 0.
    const separated =
      v.context !== undefined ||
      v["after-context"] !== undefined ||
      v["before-context"] !== undefined;
    const maxCount = v["max-count"] === undefined ? Infinity : wholeFlag(v, "max-count", 0);
    const numbered = v["line-number"] === true;
    const counting = v.count === true;
    const search = {
      pattern,
      regex: v["extended-regexp"] === true,
      ignoreCase: v["ignore-case"] === true,
      // Counting needs no context; the printed context is cut to -A and -B below.
      contextLines: counting ? 0 : Math.max(after, before),
    };

    // GNU grep's bytes into a pipe or a file; on a terminal, a stored line's control
    // characters are shown escaped, so searching an output cannot rewrite the screen.
    const onTerminal = ctx.io.stdout.isTTY === true;
    let found = 0;
    let lastPrinted = 0;
    let skip = 0;
    let cursor: SearchCursor | undefined;
    const emit = async (line: PrintedLine) => {
      if (line.number <= lastPrinted) return;
      if (separated && lastPrinted > 0 && line.number > lastPrinted + 1) {
        await ctx.out.write("--\n");
      }
      lastPrinted = line.number;
      const mark = line.matched ? ":" : "-";
      const text = onTerminal ? visible(line.text, true) : line.text;
      await ctx.out.write(numbered ? `${line.number}${mark}${text}\n` : `${text}\n`);
    };
    // Lines not printed yet, in line order: a context line after one match may be the next
    // match (printed with `:`, as grep does), so a line is printed only once no later match
    // can be it, that is once a match past it has been seen.
    const queued = new Map<number, PrintedLine>();
    const queue = (line: PrintedLine) => {
      if (line.number <= lastPrinted) return;
      const held = queued.get(line.number);
      if (held === undefined || (line.matched && !held.matched)) queued.set(line.number, line);
    };
    const flushBelow = async (limit: number) => {
      for (const [number, line] of queued) {
        if (number >= limit) break;
        queued.delete(number);
        await emit(line);
      }
    };
    while (found < maxCount) {
      const window = await ctx.client.readToolOutput(
        {
          runId,
          handle,
          omitRendered: true,
          // grep matches and prints the stored bytes, escape sequences included, as GNU grep
          // does; on a terminal they are shown escaped.
          keepAnsi: true,
          window: {
            case: "search",
            value: {
              ...search,
              maxMatches: Math.min(MATCHES_PER_WINDOW, maxCount - found),
              skip: BigInt(skip),
              ...(cursor === undefined ? {} : { after: cursor }),
            },
          },
        },
        { signal: ctx.out.signal },
      );
      const trailer = window.trailer;
      if (counting && trailer?.totalMatches !== undefined) {
        found = Math.min(maxCount, Number(trailer.totalMatches));
        break;
      }
      for (const frame of window.frames) {
        if (frame.frame.case !== "content" || frame.frame.value.body.case !== "matches") continue;
        for (const m of frame.frame.value.body.value.matches) {
          found += 1;
          if (counting) continue;
          const line = m.line;
          if (ctx.json) {
            await printJson(ctx, {
              line: Number(line?.number ?? 0),
              text: line?.text ?? "",
              clipped: line?.clipped ?? false,
              byte_offset: Number(line?.byteOffset ?? 0),
              before: m.before.slice(m.before.length - before).map(contextJson),
              after: m.after.slice(0, after).map(contextJson),
            });
            continue;
          }
          for (const c of before === 0 ? [] : m.before.slice(-before)) {
            queue({ number: Number(c.number), text: c.text, matched: false });
          }
          if (line !== undefined) {
            queue({ number: Number(line.number), text: line.text, matched: true });
          }
          for (const c of m.after.slice(0, after)) {
            queue({ number: Number(c.number), text: c.text, matched: false });
          }
          await flushBelow(Number(line?.number ?? 0));
        }
      }
      if (window.header?.binary === true) {
        ctx.io.stderr.write(`spillway-cli: grep: ${handle} is binary; search reads text only\n`);
      }
      if (trailer?.nextOffset === undefined) break;
      skip = Number(trailer.nextOffset);
      cursor = trailer.searchCursor;
    }
    await flushBelow(Number.POSITIVE_INFINITY);
    if (counting) {
      await (ctx.json ? printJson(ctx, { count: found }) : ctx.out.write(`${found}\n`));
    }
    return found > 0 ? EXIT_OK : EXIT_NO_MATCH;
  },
};

function contextJson(line: { number: bigint; text: string }): { line: number; text: string } {
  return { line: Number(line.number), text: line.text };
}
