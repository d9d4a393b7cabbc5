import { createReadStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSpillwayClient, type SpillwayClient } from "@spillway/client";
import { type SpillwayProcess, spawnSpillway } from "../test/support/spawn-spillway.js";
import { type LogFile, writeLogFile } from "./log-file.js";
import { timeSeconds } from "./timing.js";

/**
 * LogFixture is a generated log on disk and the same bytes offloaded to a Spillway on the
 * filesystem backend, so a scenario can compare Spillway with a tool run on the file itself.
 */
export interface LogFixture {
  readonly dir: string;
  /** The server's data directory: another replica started on it serves the same log. */
  readonly dataDir: string;
  readonly log: LogFile;
  readonly server: SpillwayProcess;
  readonly client: SpillwayClient;
  /** Run and handle of the offloaded log. */
  readonly runId: string;
  readonly handle: string;
  /** How long the offload took (for the record, not a scenario). */
  readonly offloadSeconds: number;
  /** Stops the server and deletes the files. */
  close(): Promise<void>;
}

/**
 * openLogFixture writes a log of `bytes` bytes (with `write`: writeLogFile's unless given) and
 * offloads it from the file, streamed.
 */
export async function openLogFixture(
  bytes: number,
  write: (path: string, bytes: number) => Promise<LogFile> = writeLogFile,
): Promise<LogFixture> {
  const dir = await mkdtemp(join(tmpdir(), "spillway-bench-log-"));
  const log = await write(join(dir, "log.txt"), bytes);
  const dataDir = join(dir, "store");
  const server = await spawnSpillway(["--data-dir", dataDir]);
  const client = createSpillwayClient({ baseUrl: server.url });
  const runId = "bench-log";
  const offloadSeconds = await timeSeconds(() =>
    client.offload(
      { tenant: "dev", runId, callId: "log" },
      createReadStream(log.path, { highWaterMark: 1024 * 1024 }),
      { contentType: "text/plain" },
    ),
  );
  return {
    dir,
    dataDir,
    log,
    server,
    client,
    runId,
    handle: "res_log",
    offloadSeconds,
    async close() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
