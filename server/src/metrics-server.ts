import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { isIP } from "node:net";
/** MetricsSource is what a scrape reads: a prom-client Registry, or the workers' metrics summed. */
export interface MetricsSource {
  /** The exposition format's content type. */
  readonly contentType: string;
  /** The metrics, in that format. */
  metrics(): Promise<string>;
}

/** MetricsServerOptions configure startMetricsServer. */
export interface MetricsServerOptions {
  /** Address to bind, e.g. 127.0.0.1. */
  readonly host: string;
  /** Port to bind; 0 picks a free port. */
  readonly port: number;
  /** Where the metrics served come from. */
  readonly registry: MetricsSource;
}

/** MetricsServer is a running metrics endpoint. */
export interface MetricsServer {
  /** The scrape URL, e.g. `http://127.0.0.1:9464/metrics`. */
  readonly url: string;
  /** Stops listening and closes open connections; resolves once the server is closed. */
  close(): Promise<void>;
}

/**
 * startMetricsServer serves the registry in the Prometheus text exposition format at
 * `GET /metrics` (any query string ignored) on a plain HTTP/1.1 server; every other method or
 * path is 404, and a registry that fails to collect answers 500. It resolves once bound.
 */
export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "").split("?", 1)[0];
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
      return;
    }
    opts.registry.metrics().then(
      (text) => {
        res.writeHead(200, { "content-type": opts.registry.contentType }).end(text);
      },
      (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end(`${message}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = isIP(opts.host) === 6 ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${urlHost}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err === undefined ? resolve() : reject(err)));
        server.closeAllConnections();
      }),
  };
}
