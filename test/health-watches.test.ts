import { connect } from "node:net";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "./support/code-of.js";
import { startTestServer, type TestServer } from "./support/test-server.js";

/**
 * Health Watch needs no token, so the process bound on open Watches is open to anyone who can
 * connect; a load balancer's Watch must still get in when someone else holds all of them.
 */
describe("health Watch streams shared among peers", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ backend: "memory", maxHealthWatches: 3 });
  });
  afterAll(() => t.stop());

  /** A Health client whose connections come from the loopback address `from`. */
  const healthFrom = (from: string) =>
    createClient(
      Health,
      createGrpcTransport({
        baseUrl: t.url,
        nodeOptions: {
          createConnection: (authority: URL) =>
            connect({ host: authority.hostname, port: Number(authority.port), localAddress: from }),
        },
      }),
    );

  /** Opens a Watch, resolves once its first status came, and keeps its outcome. */
  const watch = async (client: ReturnType<typeof healthFrom>, signal: AbortSignal) => {
    const stream = client.watch({ service: "" }, { signal })[Symbol.asyncIterator]();
    const first = await stream.next();
    const outcome = codeOf(stream.next());
    return { first: first.value?.status, outcome };
  };

  it("ends one of a hog's Watches so another peer can watch, and never the reverse", async () => {
    const done = new AbortController();
    try {
      const hog = healthFrom("127.0.0.2");
      const hogs = await Promise.all([1, 2, 3].map(() => watch(hog, done.signal)));
      expect(hogs.map((w) => w.first)).toEqual(Array(3).fill(ServingStatus.SERVING));
      await expect(watch(hog, done.signal)).rejects.toMatchObject({
        code: Code.ResourceExhausted,
      });
      const balancer = await watch(healthFrom("127.0.0.1"), done.signal);
      expect(balancer.first).toBe(ServingStatus.SERVING);
      // Exactly one of the hog's streams ended, RESOURCE_EXHAUSTED; the others still watch.
      const ended = await Promise.race(hogs.map((w, i) => w.outcome.then((code) => ({ i, code }))));
      expect(ended.code).toBe(Code.ResourceExhausted);
      // The hog cannot take the balancer's place back.
      await expect(watch(hog, done.signal)).rejects.toMatchObject({
        code: Code.ResourceExhausted,
      });
    } finally {
      done.abort();
    }
  });
});
