// measure-ansi-strip.mjs: the cost of stripping terminal escape sequences from model text. It
// offloads a 100 MiB log twice, plain and coloured on every line, to the Spillway server at
// argv[2] and prints the median of 5 reads of a lines window and of searches (a literal and a
// regex scanning the whole payload, a literal with 100 matches), stripped and with keep_ansi.
// Needs the built packages (npx tsc -b tsconfig.build.json). Run from the repository's root:
//   node server/dist/entry.cjs serve --backend filesystem --data-dir /tmp/ansi-data --port 18435 &
//   node scripts/measure-ansi-strip.mjs http://127.0.0.1:18435
import { createSpillwayClient } from "@spillway/client";

const url = process.argv[2];
const client = createSpillwayClient({ baseUrl: url });
const target = 100 * 1024 * 1024;
function makeLog(colour) {
  const parts = [];
  let size = 0;
  for (let i = 0; size < target; i++) {
    const level = i % 97 === 0 ? "ERROR" : "INFO";
    const line = colour
      ? `\u001b[2m2026-12-02T00:${String(i % 60).padStart(2, "0")}:00Z\u001b[0m \u001b[${level === "ERROR" ? 31 : 32}m${level}\u001b[0m worker-${i % 32} processed request ${i} in ${i % 100}ms\n`
      : `2026-12-02T00:${String(i % 60).padStart(2, "0")}:00Z ${level} worker-${i % 32} processed request ${i} in ${i % 100}ms\n`;
    parts.push(line);
    size += Buffer.byteLength(line);
  }
  return Buffer.from(parts.join(""));
}
async function* chunks(buf) {
  for (let i = 0; i < buf.length; i += 1 << 20) yield buf.subarray(i, i + (1 << 20));
}
const ms = async (f) => {
  const t = process.hrtime.bigint();
  const r = await f();
  return [Number(process.hrtime.bigint() - t) / 1e6, r];
};
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const colour of [false, true]) {
  const log = makeLog(colour);
  const runId = `m-${colour}-${Date.now()}`;
  const att = await client.offload({ tenant: "dev", runId, callId: "log" }, chunks(log), {
    expectedSize: BigInt(log.length),
  });
  const handle = att.handle;
  const lines = Number(att.lineCount);
  const cases = {
    "lines window (1000 lines at the middle)": {
      window: { case: "lines", value: { offset: BigInt(Math.floor(lines / 2)), limit: 1000 } },
    },
    "search literal, 1 match (full scan)": {
      window: { case: "search", value: { pattern: `processed request ${lines - 5} in`, skip: 0n } },
    },
    "search literal, 100 matches": {
      window: { case: "search", value: { pattern: "ERROR", skip: 0n } },
    },
    "search regex, 1 match (full scan)": {
      window: {
        case: "search",
        value: { pattern: `request ${lines - 5} in \\d+ms`, regex: true, skip: 0n },
      },
    },
  };
  for (const [name, req] of Object.entries(cases)) {
    for (const keepAnsi of [false, true]) {
      const times = [];
      let rendered = "";
      for (let k = 0; k < 5; k++) {
        const [t, w] = await ms(() => client.readToolOutput({ runId, handle, keepAnsi, ...req }));
        times.push(t);
        rendered = w.rendered;
      }
      console.log(
        `${colour ? "colour" : "plain "} ${keepAnsi ? "keep_ansi" : "stripped "} | ${name}: median ${median(times).toFixed(1)} ms (${(log.length / 1048576).toFixed(0)} MiB, ${lines} lines) first line: ${JSON.stringify(rendered.split("\n")[1]?.slice(0, 60))}`,
      );
    }
  }
}
