/**
 * spawnServer starts the compiled `spillway serve` with `args` on a free loopback port and
 * resolves with a SpawnedServer (its URL, pid, and how to stop it) once it listens; see
 * `spawnSpillway`. The server gets its own process (and core), so a benchmark measures it the
 * way clients meet it, not sharing one event loop with the client.
 */
export {
  type SpillwayProcess as SpawnedServer,
  spawnSpillway as spawnServer,
} from "../test/support/spawn-spillway.js";
