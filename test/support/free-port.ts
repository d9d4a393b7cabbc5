import { createServer, type Server } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * freePorts asks the kernel for `count` distinct TCP ports on 127.0.0.1 that are free at the
 * moment of the call. All are held open together (so none repeats), then released before
 * returning; a caller must bind them promptly.
 */
export async function freePorts(count: number): Promise<number[]> {
  const held: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      held.push(server);
      ports.push(await listenOnAnyPort(server));
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

function listenOnAnyPort(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        reject(new ConnectError("freePorts: the kernel returned no TCP address", Code.Internal));
        return;
      }
      resolve(address.port);
    });
  });
}
