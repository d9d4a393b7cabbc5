import type { AddressInfo, Server } from "node:net";

/**
 * listenLoopback starts `server` (an HTTP or TCP server a test wrote) on a port the system
 * picks on 127.0.0.1, and resolves with its base URL, `http://127.0.0.1:<port>`, once it listens.
 */
export async function listenLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
