// A TypeScript program that uses @spillway/client as an installed package, the way an agent
// runtime would: test/consumer.test.ts type-checks it under strict settings in a fresh project
// and runs it against a packed server. It prints one JSON line for the test to check.
import {
  createSpillwayClient,
  type OffloadKey,
  type SpillwayCallOptions,
  type SpillwayClient,
  type Window,
} from "@spillway/client";

const baseUrl = process.argv[2];
if (baseUrl === undefined) throw new Error("usage: node offload-and-read.js <server url>");

const client: SpillwayClient = createSpillwayClient({ baseUrl });
const call: SpillwayCallOptions = { timeoutMs: 10_000 };
const key: OffloadKey = { tenant: "dev", runId: "consumer", callId: "build-log" };
const log = Array.from({ length: 1000 }, (_, i) => `line ${i + 1} of the build log`).join("\n");

const attachment = await client.offload(key, log, {}, call);
const window: Window = await client.readToolOutput(
  {
    runId: key.runId,
    handle: attachment.handle,
    window: { case: "lines", value: { offset: 499n, limit: 2 } },
  },
  call,
);
console.log(
  JSON.stringify({
    handle: attachment.handle,
    lineCount: attachment.lineCount.toString(),
    nextOffset: window.trailer?.nextOffset?.toString(),
    rendered: window.rendered,
  }),
);
