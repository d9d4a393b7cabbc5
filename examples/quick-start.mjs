// Offload a 1,000,000-line log to a running Spillway server and read line 400,000 back.
// Run after `npm start` (which builds every package): node examples/quick-start.mjs [url]
import { createSpillwayClient } from "@spillway/client";

const spillway = createSpillwayClient({ baseUrl: process.argv[2] ?? "http://127.0.0.1:50051" });
const log = Array.from({ length: 1_000_000 }, (_, i) => `line ${i + 1} of the build log`).join(
  "\n",
);
const att = await spillway.offload({ tenant: "dev", runId: "run-1", callId: "call-1" }, log);
console.log(att.preview?.text);
const win = await spillway.readToolOutput({
  runId: "run-1",
  handle: att.handle,
  window: { case: "lines", value: { offset: 399_999n, limit: 3 } },
});
console.log(win.rendered);
