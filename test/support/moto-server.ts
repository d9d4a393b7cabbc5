import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.js";
import type { ObjectServer } from "./object-server.js";
import { launchObjectServer } from "./server-process.js";

/**
 * startMotoServer runs `moto_server` (pip "moto[server]") on a free loopback port and resolves
 * once ListBuckets succeeds. moto keeps its state in memory: restart() comes back empty.
 */
export async function startMotoServer(): Promise<ObjectServer> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "spillway-moto-"));
  return launchObjectServer({
    kind: "moto",
    endpoint: `http://127.0.0.1:${port}`,
    region: "us-east-1",
    accessKeyId: "spillway-test",
    secretAccessKey: "spillway-test-secret",
    dir,
    command: "moto_server",
    args: ["-H", "127.0.0.1", "-p", String(port)],
    readyTimeoutMs: 30_000,
  });
}
