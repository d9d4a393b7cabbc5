import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Code, ConnectError } from "@connectrpc/connect";
import type { TestProject } from "vitest/node";
import {
  type ObjectServer,
  type ObjectServerInfo,
  type ObjectServerKind,
  objectServerKinds,
  startObjectServer,
} from "./support/object-server.js";

declare module "vitest" {
  /** ProvidedContext carries what the global setup shares with every test file. */
  export interface ProvidedContext {
    /** objectServers holds connection info for the shared MinIO, SeaweedFS and moto servers. */
    objectServers: Record<ObjectServerKind, ObjectServerInfo>;
  }
}

/**
 * setup builds every package's dist/ once, starts one MinIO, one SeaweedFS and one moto server for the whole
 * run, provides their connection info as `inject("objectServers")`, and returns the teardown
 * that stops them all.
 * Any server failing to start fails the run; the others are stopped first.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Tests that run the compiled CLI share one build, made before any file starts: building in
  // each file would rewrite dist/ while another file's server is loading it.
  execFileSync(fileURLToPath(new URL("../node_modules/.bin/tsc", import.meta.url)), [
    "-b",
    fileURLToPath(new URL("../tsconfig.build.json", import.meta.url)),
  ]);
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
  const info = Object.fromEntries(
    servers.map(({ kind, endpoint, region, accessKeyId, secretAccessKey }) => [
      kind,
      { kind, endpoint, region, accessKeyId, secretAccessKey },
    ]),
  ) as Record<ObjectServerKind, ObjectServerInfo>;
  project.provide("objectServers", info);
  return () => stopAll(servers);
}

async function stopAll(servers: ObjectServer[]): Promise<void> {
  await Promise.all(servers.map((server) => server.stop()));
}
