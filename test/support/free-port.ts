import { createServer, type Server } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * freePorts finds `count` distinct TCP ports on 127.0.0.1 that are free at the moment of the
 * call. They are drawn below Linux's ephemeral range (32768+), which outgoing connections use,
 * so a client connection elsewhere in the test run cannot take a port between this call and
 * the server binding it (or re-binding it after a restart). All are held open together (so
 * none repeats), then released before returning; a caller must bind them promptly.
 */
export async function freePorts(count: number): Promise<number[]> {
  const held: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      held.push(server);
      ports.push(await listenOnFreePort(server));
    }
    return ports;
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/** freePort returns one TCP port on 127.0.0.1 that is free at the moment of the call. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  if (port === undefined) {
    throw new ConnectError("freePort: no port allocated", Code.Internal);
  }
  return port;
}

const LOWEST = 20_000;
const SPAN = 12_000;

async function listenOnFreePort(server: Server): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * SPAN);
    if (await tryListen(server, port)) return port;
  }
  throw new ConnectError("freePorts: no free port found below the ephemeral range", Code.Internal);
}

function tryListen(server: Server, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    server.unref();
    const onError = () => resolve(false);
    server.once("error", onError);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", onError);
      resolve(true);
    });
  });
}
