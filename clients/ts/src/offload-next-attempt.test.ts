import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/test-server.js";
import { createSpillwayClient, type SpillwayClient } from "./client.js";
import { createAttemptTracker, offloadNextAttempt } from "./offload-next-attempt.js";

describe("createAttemptTracker", () => {
  it("forgets the least recently used output and never goes back", () => {
    const tracker = createAttemptTracker(2);
    tracker.remember("a", 3);
    tracker.remember("b", 2);
    expect(tracker.latest("a")).toBe(3);
    tracker.remember("c", 5);
    expect(tracker.latest("b")).toBe(1);
    expect(tracker.latest("a")).toBe(3);
    tracker.remember("a", 2);
    expect(tracker.latest("a")).toBe(3);
  });
});

describe("offloadNextAttempt against a live server", () => {
  let t: TestServer;
  let client: SpillwayClient;
  const key = { tenant: "dev", runId: "next-attempt", callId: "call_1" };

  beforeAll(async () => {
    t = await startTestServer();
    client = createSpillwayClient({ baseUrl: t.url });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("replays the same bytes, moves other bytes to the next attempt, slots apart", async () => {
    const tracker = createAttemptTracker();
    const handles = [];
    for (const data of ["one", "one", "two", "three"]) {
      handles.push((await offloadNextAttempt(client, key, data, tracker)).handle);
    }
    expect(handles).toEqual(["res_call_1", "res_call_1", "res@2_call_1", "res@3_call_1"]);
    const out = await offloadNextAttempt(client, key, "err", tracker, { slot: "stderr" });
    expect(out.handle).toBe("out_call_1_stderr");
    const out2 = await offloadNextAttempt(client, key, "err 2", tracker, { slot: "stderr" });
    expect(out2.handle).toBe("out@2_call_1_stderr");
  });

  it("offloads a key that names its attempt, and a stream, as that one attempt", async () => {
    const tracker = createAttemptTracker();
    const named = { ...key, callId: "named" };
    await offloadNextAttempt(client, { ...named, attempt: 2 }, "x", tracker);
    const refused = await offloadNextAttempt(client, { ...named, attempt: 2 }, "y", tracker).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.AlreadyExists);
    const streamed = { ...key, callId: "streamed" };
    const stream = async function* (text: string) {
      yield new TextEncoder().encode(text);
    };
    await offloadNextAttempt(client, streamed, stream("first"), tracker);
    const again = await offloadNextAttempt(client, streamed, stream("second"), tracker).catch(
      (e: unknown) => e,
    );
    expect((again as ConnectError).code).toBe(Code.AlreadyExists);
  });
});
