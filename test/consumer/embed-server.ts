// A TypeScript program that embeds the Spillway server from the installed `spillway` package:
// test/consumer.test.ts type-checks it under strict settings in a fresh project, runs it, and
// points the client consumer at it. It prints one JSON line with its URLs, then serves until
// SIGTERM.
import {
  createMemoryBackend,
  createMetrics,
  defaultLimits,
  type SpillwayServer,
  type SpillwayServerOptions,
  startMetricsServer,
  startSpillwayServer,
} from "spillway";

const metrics = createMetrics();
const options: SpillwayServerOptions = {
  backend: createMemoryBackend(),
  port: 0,
  metrics,
  limits: { maxBlobBytes: defaultLimits.maxBlobBytes },
};
const server: SpillwayServer = await startSpillwayServer(options);
const scrape = await startMetricsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry });
console.log(JSON.stringify({ url: server.url, metrics: scrape.url }));
process.once("SIGTERM", () => {
  void Promise.all([server.close(1000), scrape.close()]).then(() => process.exit(0));
});
