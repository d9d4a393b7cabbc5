import { Code, ConnectError } from "@connectrpc/connect";
import type { TestProject } from "vitest/node";
import {
  type ObjectServer,
  type ObjectServerInfo,
  type ObjectServerKind,
  objectServerKinds,
  startObjectServer,
} from "../support/object-server.js";

declare module "vitest" {
  /** ProvidedContext carries what the global setup shares with every test file. */
  export interface ProvidedContext {
    /** objectServers holds connection info for the shared MinIO, SeaweedFS and moto servers. */
    objectServers: Record<ObjectServerKind, ObjectServerInfo>;
  }
}

/** The servers of this vitest process and how many projects still use them. */
interface SharedServers {
  readonly servers: Promise<ObjectServer[]>;
  users: number;
}

// Each project loads its global setup files on its own module runner, so module state is per
// project; the one vitest process's globalThis is what every project's setup shares.
const sharedKey = Symbol.for("spillway.test.object-servers");
const holder = globalThis as typeof globalThis & { [sharedKey]?: SharedServers };

/**
 * setup starts one MinIO, one SeaweedFS and one moto server for the whole vitest process,
 * provides their connection info to its project as `inject("objectServers")`, and returns the
 * teardown. Every project that lists this setup gets the same servers; the last teardown stops
 * them. Any server failing to start fails the run; the others are stopped first.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let shared = holder[sharedKey];
  if (shared === undefined) {
    shared = { servers: startAll(), users: 0 };
    holder[sharedKey] = shared;
  }
  shared.users++;
  const release = async (servers: ObjectServer[]) => {
    if (shared === undefined || --shared.users > 0) return;
    if (holder[sharedKey] === shared) delete holder[sharedKey];
    await stopAll(servers);
  };
  let servers: ObjectServer[];
  try {
    servers = await shared.servers;
  } catch (error) {
    await release([]);
    throw error;
  }
  const info = Object.fromEntries(
    servers.map(({ kind, endpoint, region, accessKeyId, secretAccessKey }) => [
      kind,
      { kind, endpoint, region, accessKeyId, secretAccessKey },
    ]),
  ) as Record<ObjectServerKind, ObjectServerInfo>;
  project.provide("objectServers", info);
  return () => release(servers);
}

async function startAll(): Promise<ObjectServer[]> {
  const started = await Promise.allSettled(
    objectServerKinds.map((kind) => startObjectServer(kind)),
  );
  const servers = started.flatMap((result) =>
    result.status === "fulfilled" ? [result.value] : [],
  );
  const failures = started.flatMap((result) =>
    result.status === "rejected" ? [result.reason] : [],
  );
  if (failures.length > 0) {
    await stopAll(servers);
    throw new ConnectError(
      `object servers failed to start:\n${failures.map(String).join("\n\n")}`,
      Code.Unavailable,
    );
  }
  return servers;
}

async function stopAll(servers: ObjectServer[]): Promise<void> {
  await Promise.all(servers.map((server) => server.stop()));
}
