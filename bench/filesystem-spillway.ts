import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createSpillwayClient,
  type SpillwayClient,
  type SpillwayClientOptions,
} from "@spillway/client";
import { type SpillwayProcess, spawnSpillway } from "../test/support/spawn-spillway.js";

/** FilesystemSpillway is one `spillway serve` on the filesystem backend, in a scratch directory. */
export interface FilesystemSpillway {
  /** The scratch directory; the server's data is in `<dir>/store`, the rest is the scenario's. */
  dir: string;
  server: SpillwayProcess;
  client: SpillwayClient;
}

/**
 * withFilesystemSpillway makes a fresh temporary directory named after `tag`, starts
 * `spillway serve --data-dir <dir>/store` (plus `args`) in it and runs `scenario` with a client
 * made with `clientOptions`; the server is stopped and the directory deleted afterwards,
 * whether `scenario` resolves or rejects.
 */
export async function withFilesystemSpillway<T>(
  tag: string,
  scenario: (fx: FilesystemSpillway) => Promise<T>,
  args: readonly string[] = [],
  clientOptions: Omit<SpillwayClientOptions, "baseUrl"> = {},
): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), `spillway-bench-${tag}-`));
  try {
    const server = await spawnSpillway(["--data-dir", join(dir, "store"), ...args]);
    try {
      const client = createSpillwayClient({ ...clientOptions, baseUrl: server.url });
      return await scenario({ dir, server, client });
    } finally {
      await server.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
