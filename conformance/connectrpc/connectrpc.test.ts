import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../test/support/scratch-dir.js";
import { runConnectconformance } from "./run-connectconformance.js";

/** The case the staleness check lists as known failing: one that passes. */
const passingCase =
  "Basic/HTTPVersion:2/Protocol:PROTOCOL_GRPC/Codec:CODEC_PROTO/Compression:COMPRESSION_IDENTITY/TLS:false/unary/success";

// connectrpc's own conformance suite, run by its own runner against Spillway's server stack
// and against the SDK's gRPC and gRPC-Web transports (dist/ is built by the global setup).
describe("connectrpc conformance", () => {
  const dir = scratchDir("spillway-known-failing-");

  // The features in each mode's yaml select far more cases than these minimums;
  // fewer means the runner skipped what it should run.
  for (const { side, under, minimum } of [
    { side: "server", under: "Spillway's server stack", minimum: 1800 },
    { side: "client", under: "the SDK's gRPC transport", minimum: 300 },
    { side: "client-grpc-web", under: "the SDK's gRPC-Web transport", minimum: 200 },
  ] as const) {
    it(`${under} passes every ${side} case but its known failures`, async () => {
      const run = await runConnectconformance(side);
      expect(run.output, run.command).toMatch(/^Total cases: \d+$/m);
      expect({ exitCode: run.exitCode, failed: run.failed }, run.output).toEqual({
        exitCode: 0,
        failed: 0,
      });
      expect(run.total).toBeGreaterThan(minimum);
    }, 180_000);
  }

  it("the SDK's gRPC transport ends calls at their deadlines in a starved client process", async () => {
    // A deadline that fires before a bidi call's caller first reads its response (still
    // opening the stream, still writing requests) once crashed the client process with an
    // unhandled rejection; a starved event loop makes that the usual order of events.
    const run = await runConnectconformance("client", ["--run", "Timeouts/**"], undefined, [
      "--import",
      "./dist/conformance/connectrpc/starve-event-loop.js",
    ]);
    expect({ exitCode: run.exitCode, failed: run.failed }, run.output).toEqual({
      exitCode: 0,
      failed: 0,
    });
    expect(run.total).toBe(15);
  }, 60_000);

  it("a known failure that passes fails the run, so the lists cannot go stale", async () => {
    const list = join(dir, "known-failing.txt");
    writeFileSync(list, `# passes, so listing it must fail the run\n${passingCase}\n`);
    const run = await runConnectconformance("client", ["--run", passingCase], list);
    expect(run.exitCode, run.output).not.toBe(0);
    expect(run.output).toContain(`${passingCase} was expected to fail but did not`);
  }, 60_000);
});
