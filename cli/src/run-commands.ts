import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Command, printJson } from "./command.js";
import { expectArgs, stringFlag } from "./command-line.js";
import { EXIT_OK, usageError } from "./exit-codes.js";
import { isoTime, parseDuration } from "./format.js";

function durationArg(flag: string, text: string): number {
  const seconds = parseDuration(text);
  if (seconds === undefined) {
    throw usageError(
      `${flag}: expected a duration such as 3600, 90s, 15m, 2h or 7d, got ${JSON.stringify(text)}`,
    );
  }
  return seconds;
}

/** rmCommand deletes a whole run (DeleteRun): its registry and the bytes no fork still uses. */
export const rmCommand: Command = {
  name: "rm",
  synopsis: "rm <run>",
  summary: "delete a run and every output only it refers to",
  options: {},
  async run(ctx) {
    const [runId = ""] = expectArgs("rm", ctx.args, ["<run>"]);
    const { deletedAttachments } = await ctx.client.deleteRun(runId);
    const deleted = Number(deletedAttachments);
    await (ctx.json
      ? printJson(ctx, { run_id: runId, deleted_outputs: deleted })
      : ctx.out.write(`deleted run ${runId}: ${deleted} output${deleted === 1 ? "" : "s"}\n`));
    return EXIT_OK;
  },
};

/** forkCommand makes a child run that sees the parent's handles without copied bytes (ForkRun). */
export const forkCommand: Command = {
  name: "fork",
  synopsis: "fork [--ttl <duration>] <parent> <child>",
  summary: "make a new run that sees a run's outputs, no bytes copied",
  options: { ttl: { type: "string" } },
  async run(ctx) {
    const [parent = "", child = ""] = expectArgs("fork", ctx.args, ["<parent>", "<child>"]);
    const ttl = stringFlag(ctx.values, "ttl");
    const { forkedAttachments } = await ctx.client.forkRun(parent, child, {
      ...(ttl === undefined ? {} : { ttlSeconds: durationArg("--ttl", ttl) }),
    });
    const forked = Number(forkedAttachments);
    await (ctx.json
      ? printJson(ctx, { parent_run_id: parent, run_id: child, forked_outputs: forked })
      : ctx.out.write(
          `forked ${parent} into ${child}: ${forked} output${forked === 1 ? "" : "s"}\n`,
        ));
    return EXIT_OK;
  },
};

/**
 * mergeCommand brings the outputs a forked run created into its parent under the same handles,
 * all or nothing (MergeRun).
 */
export const mergeCommand: Command = {
  name: "merge",
  synopsis: "merge <child> <parent>",
  summary: "bring the outputs a forked run made into its parent, all or nothing",
  options: {},
  async run(ctx) {
    const [child = "", parent = ""] = expectArgs("merge", ctx.args, ["<child>", "<parent>"]);
    const res = await ctx.client.mergeRun(child, parent);
    const merged = Number(res.mergedAttachments);
    const unchanged = Number(res.unchangedAttachments);
    await (ctx.json
      ? printJson(ctx, {
          run_id: child,
          parent_run_id: parent,
          merged_outputs: merged,
          unchanged_outputs: unchanged,
        })
      : ctx.out.write(
          `merged ${child} into ${parent}: ${merged} output${merged === 1 ? "" : "s"}, ${unchanged} unchanged\n`,
        ));
    return EXIT_OK;
  },
};

/** ttlCommand makes a whole run expire a duration from now (SetRunTtl). */
export const ttlCommand: Command = {
  name: "ttl",
  synopsis: "ttl <run> <duration>",
  summary: "make a run expire a duration from now (3600, 90s, 15m, 2h, 7d, 1h30m)",
  options: {},
  async run(ctx) {
    const [runId = "", text = ""] = expectArgs("ttl", ctx.args, ["<run>", "<duration>"]);
    const { expireTime } = await ctx.client.setRunTtl(runId, durationArg("ttl", text));
    const iso = isoTime(expireTime);
    await (ctx.json
      ? printJson(ctx, { run_id: runId, expire_time: iso })
      : ctx.out.write(
          `run ${runId} expires ${expireTime === undefined ? "never" : timestampDate(expireTime).toISOString()}\n`,
        ));
    return EXIT_OK;
  },
};
