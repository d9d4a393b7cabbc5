import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSpillwayClient } from "../clients/ts/src/client.js";
import { createMemoryBackend } from "../server/backends/memory.js";
import { type SpillwayServer, startSpillwayServer } from "../server/server.js";
import { sha256 } from "./support/read-back.js";

const maxBlobBytes = 1024 * 1024;
/** Above the 1,000 resets (and the 1,000 invalid frames) a connection is allowed at once. */
const refusals = 1_500;
const workers = 8;

/** chunks yields `size` bytes as 256 KiB chunks, announcing no size ahead. */
async function* chunks(size: number): AsyncGenerator<Uint8Array> {
  for (let sent = 0; sent < size; sent += 256 * 1024) {
    yield Buffer.alloc(Math.min(256 * 1024, size - sent), 0x61);
  }
}

/**
 * A client refused over and over keeps being served on its connection. Each refused offload is
 * answered while the client is still sending its payload. A client that reset each such stream
 * used up the resets nghttp2 allows one connection (1,000 at once, 33 a second after), which
 * then hung; a stream the client ended instead, closed while the server held its unread bytes
 * paused, was never freed, and at 1,000 of them Node refused every new call on the connection
 * with ENHANCE_YOUR_CALM.
 */
describe("refused calls", () => {
  let server: SpillwayServer;
  beforeAll(async () => {
    server = await startSpillwayServer({
      backend: createMemoryBackend(),
      port: 0,
      limits: { maxBlobBytes },
    });
  });
  afterAll(() => server.close(1000));

  it.each([
    ["refused at its header (size announced)", () => Buffer.alloc(3 * maxBlobBytes, 0x61)],
    ["refused part way (size not announced)", () => chunks(3 * maxBlobBytes)],
  ])(
    "answers every offload %s, and the next call succeeds",
    async (_, data) => {
      const spillway = createSpillwayClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
      const answers = new Map<string, number>();
      let next = 0;
      const worker = async () => {
        while (next < refusals) {
          const callId = `c${next++}`;
          try {
            await spillway.offload({ tenant: "dev", runId: "r", callId }, data(), undefined, {
              timeoutMs: 20_000,
            });
            answers.set("stored", (answers.get("stored") ?? 0) + 1);
          } catch (err) {
            const { code, rawMessage } = ConnectError.from(err);
            const answer = `${Code[code]}: ${rawMessage.replace(/\d+/g, "N")}`;
            answers.set(answer, (answers.get(answer) ?? 0) + 1);
          }
        }
      };
      await Promise.all(Array.from({ length: workers }, worker));

      expect([...answers]).toEqual([
        [expect.stringMatching(/^ResourceExhausted: .*exceeds max_blob_bytes N$/), refusals],
      ]);
      const kept = await spillway.offload({ tenant: "dev", runId: "r", callId: "after" }, "kept\n");
      expect(kept.sha256).toBe(sha256("kept\n"));
    },
    120_000,
  );
});
