import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { spillwayCli } from "./support/spawn-spillway.js";

/**
 * Starts `spillway serve` under `nodeFlags` plus V8's verbose GC trace, with every collection
 * a full one, and resolves with the growing factor V8 applied to the heap limit in the last full
 * collection before the server logged that it listens (the `(3.0)` of
 * `[HeapController] Limit: old size: … KB, new limit: … KB (3.0)`). Loading the server's modules
 * collects many times after the executable's first line; a collection during Node's own start-up,
 * before that line runs, would still show V8's own factor, so the first one is not the one read.
 */
function growingFactorAtListen(dataDir: string, nodeFlags: readonly string[]): Promise<number> {
  const child = spawn(
    process.execPath,
    [
      "--trace-gc-verbose",
      "--gc-global",
      ...nodeFlags,
      spillwayCli,
      "serve",
      "--port",
      "0",
      "--data-dir",
      dataDir,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const listening = out.indexOf('"url":"');
      if (listening < 0) return;
      const factors = [...out.slice(0, listening).matchAll(limitLine)].map((m) => Number(m[1]));
      child.kill("SIGKILL");
      const last = factors.at(-1);
      if (last === undefined) reject(new Error(`no full collection before listening: ${out}`));
      else resolve(last);
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(new Error(`spillway serve exited (${code ?? signal}) before listening: ${out}`)),
    );
  });
}

const limitLine = /\[HeapController\] Limit: [^\n]*\((\d+\.\d+)\)/g;

/**
 * The `spillway` executable fixes V8's heap growing factor at 3 (server/entry.cts), so a small
 * live heap keeps room for the young generation after an idle gap; an operator's own
 * `--heap-growing-percent` wins.
 */
describe("spillway serve: V8's heap growing factor", () => {
  const dir = scratchDir("spillway-heap-");

  it("is 3 by default and the operator's when set", async () => {
    expect(await growingFactorAtListen(join(dir, "a"), [])).toBe(3);
    expect(await growingFactorAtListen(join(dir, "b"), ["--heap-growing-percent=50"])).toBe(1.5);
  });
});
