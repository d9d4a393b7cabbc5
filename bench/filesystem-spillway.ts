import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import {
  createSpillwayClient,
  type SpillwayClient,
  type SpillwayClientOptions,
} from "@spillway/client";
import { type SpillwayProcess, spawnSpillway } from "../test/support/spawn-spillway.js";

/** Topology is how a scenario lays out its server's processes and its client's connections. */
export interface Topology {
  /** What the scenario's row name ends with ("" for the defaults). */
  readonly suffix: string;
  /** `spillway serve` arguments. */
  readonly args: readonly string[];
  /** SDK client options. */
  readonly client: Omit<SpillwayClientOptions, "baseUrl">;
}

/**
 * What `spillway serve` and the SDK run unless told: a worker a core (said outright, so the
 * bench waits for each to listen), the client's default connections.
 */
export const everyCore: Topology = {
  suffix: "",
  args: ["--workers", String(availableParallelism())],
  client: {},
};

/** One server process and one connection: Spillway before it ran a worker a core. */
export const oneWorker: Topology = {
  suffix: "_one_worker",
  args: ["--workers", "1"],
  client: { connections: 1 },
};

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
