import { randomBytes } from "node:crypto";
import { createReadStream, statSync } from "node:fs";
import { basename } from "node:path";
import { attachmentJson } from "@spillway/client";
import { type Command, printJson } from "./command.js";
import { expectArgs, stringFlag } from "./command-line.js";
import { EXIT_OK, usageError } from "./exit-codes.js";
import { parseDuration, visible } from "./format.js";
import { createProgressBar, type ProgressBar } from "./progress-bar.js";

/** Bytes read from the file per chunk: the client sends 1 MiB messages. */
const READ_CHUNK = 1024 * 1024;

/** counted passes `source` through, counting its bytes on `bar` as the offload takes them. */
async function* counted(
  source: AsyncIterable<Buffer | string>,
  bar: ProgressBar | undefined,
): AsyncGenerator<Uint8Array> {
  for await (const chunk of source) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    bar?.advance(bytes.byteLength);
    yield bytes;
  }
}

/**
 * putCommand offloads a file, or stdin (`-` or no file), as one output of a run and prints its
 * handle. The bytes stream as they are read, so a file of any size takes constant memory; a
 * file's size is announced (expected_size), so one over the server's limit is refused before
 * it is sent. On a terminal (stderr a TTY) a progress bar shows bytes, rate and, for a file,
 * percentage and ETA; anywhere else it stays quiet.
 */
export const putCommand: Command = {
  name: "put",
  synopsis:
    "put [--call-id <id>] [--attempt <n>] [--name <name>] [--content-type <type>] [--ttl <duration>] [-q] <run> [<file> | -]",
  summary: "store a file or stdin as an output of a run; prints its handle",
  options: {
    "call-id": { type: "string" },
    attempt: { type: "string" },
    name: { type: "string" },
    "content-type": { type: "string" },
    ttl: { type: "string" },
    quiet: { type: "boolean", short: "q" },
  },
  async run(ctx) {
    const [runId = "", file = "-"] = expectArgs("put", ctx.args, ["<run>", "[<file>]"]);
    const ttlText = stringFlag(ctx.values, "ttl");
    const ttl = ttlText === undefined ? undefined : parseDuration(ttlText);
    if (ttlText !== undefined && ttl === undefined) {
      throw usageError(
        `--ttl: expected a duration such as 3600, 90s, 15m, 2h or 7d, got ${JSON.stringify(ttlText)}`,
      );
    }
    const attemptText = stringFlag(ctx.values, "attempt");
    const attempt = attemptText === undefined ? undefined : parseAttempt(attemptText);
    const fromStdin = file === "-";
    let size: number | undefined;
    if (!fromStdin) {
      // Opened before any call, so a missing file fails here (exit 3) and not as a stream error.
      const stats = statSync(file);
      if (!stats.isFile()) throw new Error(`${file}: not a regular file`);
      size = stats.size;
    }
    const source = fromStdin ? ctx.io.stdin : createReadStream(file, { highWaterMark: READ_CHUNK });
    const bar =
      ctx.io.stderr.isTTY === true && ctx.values.quiet !== true
        ? createProgressBar({
            stream: ctx.io.stderr,
            label: fromStdin ? "stdin" : visible(basename(file)),
            total: size,
          })
        : undefined;
    const { tenant } = await ctx.client.serverInfo();
    const callId =
      stringFlag(ctx.values, "call-id") ??
      `put-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
    const contentType = stringFlag(ctx.values, "content-type");
    const attachment = await ctx.client.offload(
      { tenant, runId, callId, ...(attempt === undefined ? {} : { attempt }) },
      counted(source as AsyncIterable<Buffer | string>, bar),
      {
        name: stringFlag(ctx.values, "name") ?? (fromStdin ? "stdin" : basename(file)),
        ...(contentType === undefined ? {} : { contentType }),
        ...(size === undefined ? {} : { expectedSize: BigInt(size) }),
        ...(ttl === undefined ? {} : { ttl: { seconds: BigInt(ttl), nanos: 0 } }),
      },
    );
    bar?.finish();
    if (ctx.json) {
      await printJson(ctx, attachmentJson(attachment));
    } else {
      await ctx.out.write(`${attachment.handle}\n`);
    }
    return EXIT_OK;
  },
};

/** parseAttempt reads `--attempt`: a whole number from 1 to 1000 (1 is the first attempt). */
function parseAttempt(text: string): number {
  const n = /^[0-9]{1,4}$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= 1 && n <= 1000)) {
    throw usageError(
      `--attempt: expected a whole number from 1 to 1000, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}
