import { closeSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import {
  type BlockQuery,
  blockScanTasks,
  findBlocksInMemory,
  findBlocksOnThreads,
} from "./find-blocks.js";
import { createScanPool } from "./scan-pool.js";

/** A log of about 3 MiB with the needle on a few lines and escape bytes on a few others. */
function sampleLog(): Buffer {
  const lines: string[] = [];
  for (let k = 0; k < 60_000; k++) {
    const extra = k % 9_001 === 17 ? " the needle" : k % 13_007 === 5 ? " \u001b[1mbold" : "";
    lines.push(`${k} request ok user=${k % 97} latency=${k % 1000}ms${extra}`);
  }
  return Buffer.from(`${lines.join("\n")}\n`);
}

describe("findBlocksOnThreads", () => {
  const scratch = scratchDir("spillway-find-blocks-");
  const pool = createScanPool(2);
  afterAll(() => pool.close());
  const bytes = sampleLog();
  const path = join(scratch, "log.txt");
  writeFileSync(path, bytes);
  const query: BlockQuery = {
    from: 64 * 1024,
    blockBytes: 64 * 1024,
    text: Buffer.from("the needle"),
    escapes: true,
    maxShare: 1,
  };

  it("finds, on its threads, the blocks the calling thread finds", async () => {
    const fd = openSync(path, "r");
    try {
      const found = await findBlocksOnThreads(pool, fd, bytes.length, query);
      expect(found).toEqual(findBlocksInMemory(bytes, query));
      expect(found?.length).toBeGreaterThan(5);
      const plain = await findBlocksOnThreads(pool, fd, bytes.length, { ...query, escapes: false });
      expect(plain).toEqual(findBlocksInMemory(bytes, { ...query, escapes: false }));
      expect(plain?.length).toBeLessThan(found?.length ?? 0);
    } finally {
      closeSync(fd);
    }
  });

  it("answers undefined when cancelled or too many blocks qualify, and rejects a closed descriptor", async () => {
    const fd = openSync(path, "r");
    try {
      const aborted = await findBlocksOnThreads(pool, fd, bytes.length, query, AbortSignal.abort());
      expect(aborted).toBeUndefined();
      const common = { ...query, text: Buffer.from("request"), maxShare: 0.5 };
      expect(await findBlocksOnThreads(pool, fd, bytes.length, common)).toBeUndefined();
    } finally {
      closeSync(fd);
    }
    const gone = openSync(path, "r");
    closeSync(gone);
    await expect(findBlocksOnThreads(pool, gone, bytes.length, query)).rejects.toThrow();
    const fd2 = openSync(path, "r");
    try {
      // The threads kept serving.
      expect(await findBlocksOnThreads(pool, fd2, bytes.length, query)).toEqual(
        findBlocksInMemory(bytes, query),
      );
    } finally {
      closeSync(fd2);
    }
  });

  it("lets a short scan take its turn between the tasks of a long one", async () => {
    const single = createScanPool(1);
    const fd = openSync(path, "r");
    try {
      const progress = () => new Int32Array(new SharedArrayBuffer(8));
      const long = blockScanTasks(query, bytes.length, 8, bytes) ?? [];
      const short = blockScanTasks(query, bytes.length, 1, bytes) ?? [];
      expect([long.length, short.length]).toEqual([8, 1]);
      const order: string[] = [];
      const first = single.scan(fd, long, progress()).then(() => order.push("long"));
      const second = single.scan(fd, short, progress()).then(() => order.push("short"));
      await Promise.all([first, second]);
      expect(order).toEqual(["short", "long"]);
    } finally {
      closeSync(fd);
      await single.close();
    }
  });
});
