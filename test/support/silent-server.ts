import { createServer, type Socket } from "node:net";
import { listenLoopback } from "./listen-loopback.js";

/** SilentServer is a listener that accepts connections and never answers on them. */
export interface SilentServer {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Resolves once some client has sent bytes on one of its connections. */
  readonly reached: Promise<void>;
  /** Destroys every connection it accepted and stops listening. */
  close(): Promise<void>;
}

/**
 * startSilentServer listens on a loopback port the system picks and accepts every connection,
 * reading what it is sent and answering nothing: a Spillway that is up but hung, where a call
 * waits out its deadline rather than failing fast as at a closed port.
 */
export async function startSilentServer(): Promise<SilentServer> {
  const sockets = new Set<Socket>();
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("data", () => reach());
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  const url = await listenLoopback(server);
  return {
    url,
    reached,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
