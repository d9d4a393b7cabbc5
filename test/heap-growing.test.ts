import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "./support/scratch-dir.js";
import { spillwayCli } from "./support/spawn-spillway.js";

/**
 * Starts `spillway serve` under `nodeFlags` plus V8's verbose GC trace, with every collection
 * a full one, and resolves with the growing factor V8 applied to the heap limit after its first
 * full collection (the `(3.0)` of `[HeapController] Limit: old size: … KB, new limit: … KB (3.0)`).
 */
function firstGrowingFactor(dataDir: string, nodeFlags: readonly string[]): Promise<number> {
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
      const factor = /\[HeapController\] Limit: [^\n]*\((\d+\.\d+)\)/.exec(out)?.[1];
      if (factor !== undefined) {
        child.kill("SIGKILL");
        resolve(Number(factor));
      }
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(new Error(`spillway serve exited (${code ?? signal}) before a full GC: ${out}`)),
    );
  });
}

/**
 * The `spillway` executable fixes V8's heap growing factor at 3 (server/entry.cts), so a small
 * live heap keeps room for the young generation after an idle gap; an operator's own
 * `--heap-growing-percent` wins.
 */
describe("spillway serve: V8's heap growing factor", () => {
  const dir = scratchDir("spillway-heap-");

  it("is 3 by default and the operator's when set", async () => {
    expect(await firstGrowingFactor(join(dir, "a"), [])).toBe(3);
    expect(await firstGrowingFactor(join(dir, "b"), ["--heap-growing-percent=50"])).toBe(1.5);
  });
});
