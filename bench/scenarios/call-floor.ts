import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { type ClientHttp2Session, connect } from "node:http2";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { LogFixture } from "../log-fixture.js";
import { type BenchResult, median, ratioResult } from "../result.js";
import { settleRounds } from "../timing.js";
import { deepWindowLine } from "./windows.js";

const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));
/** Sequential calls per batch; a sample is one batch's median. */
const perBatch = 200;
/** Untimed batches of each call before the timed ones. */
const warmBatches = 10;

/** BareHttp2 is the floor's server, in its own process, and a session to it. */
interface BareHttp2 {
  /** One POST of 5 bytes answered with 2, timed in microseconds. */
  roundTrip(): Promise<number>;
  close(): Promise<void>;
}

async function startBareHttp2(): Promise<BareHttp2> {
  const child: ChildProcess = spawn(
    process.execPath,
    [fileURLToPath(new URL("../bare-http2-server.js", import.meta.url))],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const [line] = (await once(child.stdout ?? child, "data")) as [Buffer];
  const session: ClientHttp2Session = connect(`http://127.0.0.1:${line.toString().trim()}`);
  const body = Buffer.from("hello");
  return {
    async roundTrip() {
      const started = performance.now();
      const stream = session.request({ ":method": "POST", ":path": "/floor" });
      stream.on("data", () => undefined);
      stream.end(body);
      await once(stream, "end");
      return (performance.now() - started) * 1000;
    },
    async close() {
      session.close();
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

/** The median of perBatch sequential calls of fn. */
async function batchMedian(fn: () => Promise<number>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < perBatch; i++) samples.push(await fn());
  return median(samples);
}

/** Microseconds one call of fn takes. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return (performance.now() - started) * 1000;
}

/**
 * Reads the 100-line window at 0-based `line` as a model tool does (the rendered text alone),
 * checks where it starts, and returns how long it took in microseconds.
 */
async function modelWindow(fx: LogFixture, line: number): Promise<number> {
  const started = performance.now();
  const window = await fx.client.readToolOutput({
    runId: fx.runId,
    handle: fx.handle,
    renderedOnly: true,
    window: { case: "lines", value: { offset: BigInt(line), limit: 100 } },
  });
  const micros = (performance.now() - started) * 1000;
  if (!window.rendered.includes(`\n${String(line + 1).padStart(6)}\t`)) {
    throw new Error(`window at ${line} does not start at line ${line + 1}`);
  }
  return micros;
}

/** The Python SDK's batch medians for the same calls (bench/harness-call-floor.py). */
async function pythonFloor(
  fx: LogFixture,
  line: number,
  batches: number,
): Promise<{ server_info_ms: number[]; window_ms: number[] }> {
  await run("bash", [join(repoRoot, "scripts/setup-python.sh")]);
  const { stdout } = await run(join(repoRoot, ".venv-python/bin/python"), [
    join(repoRoot, "bench/harness-call-floor.py"),
    fx.server.url.replace(/^http:\/\//, ""),
    fx.runId,
    fx.handle,
    String(line),
    String(batches),
    String(perBatch),
  ]);
  return JSON.parse(stdout) as { server_info_ms: number[]; window_ms: number[] };
}

/**
 * callFloorScenarios measures what a call costs beyond HTTP/2 itself: `call_floor`, a no-op
 * unary call (GetServerInfo) from the TypeScript SDK, and `deep_window_vs_floor`, a 100-line
 * window deep in the 1 GiB log read as the model tool reads it (`renderedOnly`), each against a bare node:http2 round trip to a server that
 * does nothing (its own process), in alternating batches of 200 sequential calls; a sample is
 * a batch's median. The Python SDK's figures for the same two calls are reported beside them
 * (`call_floor_python`, `deep_window_vs_floor_python`), against the same floor.
 */
export async function callFloorScenarios(fx: LogFixture, runs: number): Promise<BenchResult[]> {
  const batches = Math.max(5, runs);
  const line = deepWindowLine(fx);
  const bare = await startBareHttp2();
  let samples: { floor: number[]; unary: number[]; deep: number[] };
  try {
    // Untimed batches first: the page cache, and both servers' code compiled by V8's optimizing
    // tier as in a long-running process (a fresh server's window takes about half again as
    // long over its first thousand calls).
    for (let batch = 0; batch < warmBatches; batch++) {
      await batchMedian(() => bare.roundTrip());
      await batchMedian(() => timed(() => fx.client.serverInfo()));
      await batchMedian(() => modelWindow(fx, line));
    }
    // More batches while the floor is unsettled, up to three times as many (settleRounds).
    samples = await settleRounds(
      batches,
      async () => ({
        floor: await batchMedian(() => bare.roundTrip()),
        unary: await batchMedian(() => timed(() => fx.client.serverInfo())),
        deep: await batchMedian(() => modelWindow(fx, line)),
      }),
      "floor",
    );
  } finally {
    await bare.close();
  }
  const { floor, unary, deep } = samples;
  const python = await pythonFloor(fx, line, floor.length);
  const micros = (ms: number[]) => ms.map((v) => v * 1000);
  const overFloor = (max: number) => ({
    unit: "µs",
    baseline: "a bare node:http2 round trip (5-byte POST, 2-byte answer) to a do-nothing server",
    baselineSamples: floor,
    ratioOf: (value: number, baseline: number) => value / baseline,
    target: `ratio <= ${max}`,
    meets: (ratio: number) => ratio <= max,
  });
  const reported = {
    target: "none (reported beside the TypeScript SDK's figure)",
    meets: () => true,
  };
  return [
    ratioResult({ name: "call_floor", spillway: unary, ...overFloor(3) }),
    ratioResult({ name: "deep_window_vs_floor", spillway: deep, ...overFloor(5) }),
    ratioResult({
      name: "call_floor_python",
      spillway: micros(python.server_info_ms),
      ...overFloor(3),
      ...reported,
    }),
    ratioResult({
      name: "deep_window_vs_floor_python",
      spillway: micros(python.window_ms),
      ...overFloor(5),
      ...reported,
    }),
  ];
}
