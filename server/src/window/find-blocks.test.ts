import { closeSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { scratchDir } from "../../../test/support/scratch-dir.js";
import {
  type BlockQuery,
  blockScanTasks,
  type FoundBlocks,
  findBlocksInMemory,
  findBlocksOnThreads,
} from "./find-blocks.js";
import { createScanPool, type ScanPool } from "./scan-pool.js";

/** A log of about 3 MiB with the needle on a few lines and escape bytes on a few others. */
function sampleLog(): Buffer {
  const lines: string[] = [];
  for (let k = 0; k < 60_000; k++) {
    const extra = k % 9_001 === 17 ? " the needle" : k % 13_007 === 5 ? " \u001b[1mbold" : "";
    lines.push(`${k} request ok user=${k % 97} latency=${k % 1000}ms${extra}`);
  }
  return Buffer.from(`${lines.join("\n")}\n`);
}

/** The blocks of every stretch, or undefined when a stretch's are. */
async function allBlocks(
  stretches: AsyncIterable<FoundBlocks> | Iterable<FoundBlocks>,
): Promise<number[] | undefined> {
  const found: number[] = [];
  for await (const { blocks } of stretches) {
    if (blocks === undefined) return undefined;
    found.push(...blocks);
  }
  return found;
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
      const found = await allBlocks(findBlocksOnThreads(pool, "a", fd, bytes.length, query));
      expect(found).toEqual(await allBlocks(findBlocksInMemory(bytes, query)));
      expect(found?.length).toBeGreaterThan(5);
      const plain = await allBlocks(
        findBlocksOnThreads(pool, "a", fd, bytes.length, { ...query, escapes: false }),
      );
      expect(plain).toEqual(
        await allBlocks(findBlocksInMemory(bytes, { ...query, escapes: false })),
      );
      expect(plain?.length).toBeLessThan(found?.length ?? 0);
    } finally {
      closeSync(fd);
    }
  });

  it("runs the line expression over the lines, on its threads too, when the text is common or none", async () => {
    const fd = openSync(path, "r");
    try {
      // `request ` is on every line: each line holding it tested alone would cost more.
      const source = "latency=2[0-9]ms the";
      const line = { source, flags: "u", chunked: source };
      const common = { ...query, text: Buffer.from("request "), line, escapes: false };
      const sample = bytes.subarray(common.from);
      expect(blockScanTasks(common, bytes.length, 2, sample)?.[0]?.byExpression).toBe(true);
      const rare = { ...common, text: Buffer.from("the needle") };
      expect(blockScanTasks(rare, bytes.length, 2, sample)?.[0]?.byExpression).toBeUndefined();
      // A common text beside a rare one that every match holds too: the rare one is looked for.
      const also = { ...common, also: [Buffer.from("ms the"), Buffer.from("user=")] };
      const [task] = blockScanTasks(also, bytes.length, 2, sample) ?? [];
      expect([task?.byExpression, Buffer.from(task?.text ?? []).toString()]).toEqual([
        undefined,
        "ms the",
      ]);
      expect(await allBlocks(findBlocksOnThreads(pool, "a", fd, bytes.length, also))).toEqual(
        await allBlocks(findBlocksInMemory(bytes, common)),
      );
      const none = { ...common, text: Buffer.alloc(0) };
      const lineBound = { ...common, line: { source, flags: "u" } };
      expect(blockScanTasks(lineBound, bytes.length, 2, sample)?.[0]?.byExpression).toBeUndefined();
      expect(blockScanTasks({ ...none, line: lineBound.line }, bytes.length, 2, sample)).toBe(
        undefined,
      );
      // Of the lines holding the needle, those at 20-29 ms (27,020 to 54,023): their blocks only.
      const blocks = bytes
        .toString("latin1")
        .split("\n")
        .flatMap((text, k, all) =>
          /latency=2[0-9]ms the/.test(text)
            ? [Math.floor(Buffer.byteLength(all.slice(0, k).join("\n")) / query.blockBytes)]
            : [],
        );
      expect(blocks.length).toBeGreaterThan(0);
      for (const q of [common, none]) {
        expect(await allBlocks(findBlocksOnThreads(pool, "a", fd, bytes.length, q))).toEqual(
          blocks,
        );
        expect(await allBlocks(findBlocksInMemory(bytes, q))).toEqual(blocks);
      }
    } finally {
      closeSync(fd);
    }
  });

  it("answers undefined when cancelled or too many blocks qualify, and rejects a closed descriptor", async () => {
    const fd = openSync(path, "r");
    try {
      const aborted = await allBlocks(
        findBlocksOnThreads(pool, "a", fd, bytes.length, query, AbortSignal.abort()),
      );
      expect(aborted).toBeUndefined();
      const common = { ...query, text: Buffer.from("request"), maxShare: 0.5 };
      expect(
        await allBlocks(findBlocksOnThreads(pool, "a", fd, bytes.length, common)),
      ).toBeUndefined();
    } finally {
      closeSync(fd);
    }
    const gone = openSync(path, "r");
    closeSync(gone);
    await expect(
      allBlocks(findBlocksOnThreads(pool, "a", gone, bytes.length, query)),
    ).rejects.toThrow();
    const fd2 = openSync(path, "r");
    try {
      // The threads kept serving.
      expect(await allBlocks(findBlocksOnThreads(pool, "a", fd2, bytes.length, query))).toEqual(
        await allBlocks(findBlocksInMemory(bytes, query)),
      );
    } finally {
      closeSync(fd2);
    }
  });

  /** Runs `scans` on a pool of one thread over the log, closing both afterwards. */
  async function onOneThread(
    scans: (single: ScanPool, fd: number, progress: () => Int32Array) => Promise<void>,
  ): Promise<void> {
    const single = createScanPool(1);
    const fd = openSync(path, "r");
    try {
      await scans(single, fd, () => new Int32Array(new SharedArrayBuffer(8)));
    } finally {
      closeSync(fd);
      await single.close();
    }
  }

  it("lets a short scan take its turn between the tasks of a long one", () =>
    onOneThread(async (single, fd, progress) => {
      const long = blockScanTasks(query, bytes.length, 8, bytes) ?? [];
      const short = blockScanTasks(query, bytes.length, 1, bytes) ?? [];
      expect([long.length, short.length]).toEqual([8, 1]);
      const order: string[] = [];
      const first = Promise.all(single.scan(fd, long, progress(), "a")).then(() =>
        order.push("long"),
      );
      const second = Promise.all(single.scan(fd, short, progress(), "a")).then(() =>
        order.push("short"),
      );
      await Promise.all([first, second]);
      expect(order).toEqual(["short", "long"]);
    }));

  it("gives an owner with one scan every other turn beside an owner with many", () =>
    onOneThread(async (single, fd, progress) => {
      const two = blockScanTasks(query, bytes.length, 2, bytes) ?? [];
      expect(two.length).toBe(2);
      const order: string[] = [];
      const scans = [
        ...Array.from({ length: 8 }, (_, k) =>
          Promise.all(single.scan(fd, two, progress(), "busy")).then(() => order.push(`busy ${k}`)),
        ),
        Promise.all(single.scan(fd, two, progress(), "other")).then(() => order.push("other")),
      ];
      await Promise.all(scans);
      // Taking turns by scan alone, the other tenant's scan ended last, behind 16 tasks.
      expect(order.slice(0, 2)).toEqual(["busy 0", "other"]);
    }));
});
