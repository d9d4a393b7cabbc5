import { createHash, randomBytes } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { createSpillwayClient } from "@spillway/client";
import { SpillwayService } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpillwayProcess, spawnSpillway } from "./support/spawn-spillway.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

// The executable installs Uint8Array.prototype.toBase64 before @bufbuild/protobuf loads, so its
// JSON encoding of data frames takes the native path (server/src/uint8array-to-base64.ts).
describe("bytes windows read as JSON (Connect, useBinaryFormat: false) from `spillway serve`", () => {
  let server: SpillwayProcess;
  beforeAll(async () => {
    server = await spawnSpillway(["--backend", "memory"]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("carries every byte of a 3 MiB random output, base64 in JSON, in data frames", async () => {
    const payload = randomBytes(3 * 1024 * 1024 + 1);
    const sdk = createSpillwayClient({ baseUrl: server.url });
    const stored = await sdk.offload({ tenant: "dev", runId: "json", callId: "bin" }, payload);
    const json = createClient(
      SpillwayService,
      createConnectTransport({ baseUrl: server.url, httpVersion: "2", useBinaryFormat: false }),
    );
    const pieces: Uint8Array[] = [];
    let frames = 0;
    for await (const frame of json.readToolOutput({
      runId: "json",
      handle: stored.handle,
      omitRendered: true,
      window: { case: "bytes", value: {} },
    })) {
      if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
        frames += 1;
        pieces.push(frame.frame.value.body.value);
      }
    }
    expect(frames).toBeGreaterThan(1);
    expect(sha256(Buffer.concat(pieces))).toBe(sha256(payload));
  });
});
