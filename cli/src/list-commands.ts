import { attachmentJson, runInfoJson } from "@spillway/client";
import type { RunInfo } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { type Command, printJson } from "./command.js";
import { expectArgs } from "./command-line.js";
import { EXIT_OK } from "./exit-codes.js";
import { formatBytes, humanTime, table, visible } from "./format.js";

/** runsCommand lists the calling tenant's runs (ListRuns), every page. */
export const runsCommand: Command = {
  name: "runs",
  synopsis: "runs",
  summary: "list your runs: outputs, bytes, last write, expiry, fork parent",
  options: {},
  async run(ctx) {
    expectArgs("runs", ctx.args, []);
    const runs: RunInfo[] = [];
    for await (const run of ctx.client.listAllRuns({ pageSize: 1000 })) runs.push(run);
    if (ctx.json) {
      await printJson(ctx, { runs: runs.map(runInfoJson) });
      return EXIT_OK;
    }
    await ctx.out.write(
      table(
        ["RUN", "OUTPUTS", "SIZE", "UPDATED", "EXPIRES", "PARENT"],
        runs.map((r) => [
          r.runId,
          String(r.outputCount),
          formatBytes(Number(r.sizeBytes)),
          humanTime(r.updateTime),
          humanTime(r.expireTime),
          r.parentRunId === "" ? "-" : r.parentRunId,
        ]),
      ),
    );
    return EXIT_OK;
  },
};

/** lsCommand lists a run's outputs (ListToolOutputs), every page, in the server's order (each output's attempts together). */
export const lsCommand: Command = {
  name: "ls",
  synopsis: "ls <run>",
  summary: "list a run's outputs: handle, size, lines, type, time, name",
  options: {},
  async run(ctx) {
    const [runId = ""] = expectArgs("ls", ctx.args, ["<run>"]);
    const outputs = [];
    for await (const a of ctx.client.listAll(runId, { pageSize: 1000 })) outputs.push(a);
    if (ctx.json) {
      await printJson(ctx, { run_id: runId, outputs: outputs.map(attachmentJson) });
      return EXIT_OK;
    }
    await ctx.out.write(
      table(
        ["HANDLE", "SIZE", "LINES", "TYPE", "CREATED", "NAME"],
        outputs.map((a) => [
          a.handle,
          formatBytes(Number(a.sizeBytes)),
          a.binary ? "binary" : String(a.lineCount),
          a.contentType === "" ? "-" : a.contentType,
          humanTime(a.createTime),
          a.name === "" ? "-" : a.name,
        ]),
      ),
    );
    return EXIT_OK;
  },
};

/** statCommand prints one output's record (StatToolOutput). */
export const statCommand: Command = {
  name: "stat",
  synopsis: "stat <run> <handle>",
  summary: "show one output's record: sizes, lines, sha256, times, storage",
  options: {},
  async run(ctx) {
    const [runId = "", handle = ""] = expectArgs("stat", ctx.args, ["<run>", "<handle>"]);
    const record = attachmentJson(await ctx.client.stat(runId, handle));
    if (ctx.json) {
      await printJson(ctx, record);
      return EXIT_OK;
    }
    const rows: [string, string][] = [
      ["handle", record.handle],
      ["name", record.name || "-"],
      ["slot", record.slot || "-"],
      ["content type", record.content_type || "-"],
      ["size", `${record.size_bytes} (${formatBytes(record.size_bytes)})`],
      ["observed", String(record.observed_bytes)],
      ["lines", record.binary ? "- (binary)" : String(record.line_count)],
      ["truncated", String(record.truncated)],
      ["readable", String(record.readable)],
      ["stored", record.stored],
      ["sha256", record.sha256],
      ["created", record.create_time ?? "-"],
      ["expires", record.expire_time ?? "-"],
    ];
    await ctx.out.write(rows.map(([k, v]) => `${`${k}:`.padEnd(14)}${visible(v)}\n`).join(""));
    return EXIT_OK;
  },
};
