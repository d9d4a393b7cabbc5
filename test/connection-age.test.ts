import * as http2 from "node:http2";
import { createSpillwayClient } from "@spillway/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryBackend } from "../server/src/backends/memory.js";
import { type SpillwayServer, startSpillwayServer } from "../server/src/server.js";

describe("max connection age", () => {
  let server: SpillwayServer;
  beforeAll(async () => {
    server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      maxConnectionAgeMs: 200,
    });
  });
  afterAll(() => server.close(1000));

  it("sends GOAWAY to an aged connection, and clients carry on over a new one", async () => {
    const session = http2.connect(server.url);
    const goaway = new Promise<number>((resolve) =>
      session.once("goaway", (code) => resolve(code)),
    );
    expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
    session.destroy();

    const client = createSpillwayClient({ baseUrl: server.url });
    await client.offload({ tenant: "dev", runId: "r", callId: "c" }, "before\n");
    await new Promise((r) => setTimeout(r, 400));
    const read = await client.readToolOutput({ runId: "r", handle: "res_c" });
    expect(read.rendered).toContain("before");
  });
});
