import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { withFilesystemSpillway } from "../filesystem-spillway.js";
import { statusMiB } from "../peak-rss.js";
import { type BenchResult, median, throughputResult } from "../result.js";
import { alternate } from "../timing.js";

const MiB = 1024 * 1024;

/** The compiled `spillway-cli` bin, as npm links it (`npm run bench` builds dist/ first). */
const spillwayCliBin = createRequire(import.meta.url)
  .resolve("@spillway/cli/package.json")
  .replace(/package\.json$/, "bin/spillway-cli.js");

/**
 * drain runs `command` with its stdout on a pipe that this process reads and, with `hashed`,
 * hashes, as a `| sha256sum` would (without, it only counts, as a `> /dev/null` would), and
 * resolves with the bytes' sha256 (of nothing when not hashed), their count and the command's
 * peak RSS (VmHWM, polled every 10 ms until it exits). Anything but exit 0 rejects.
 */
function drain(
  command: string,
  args: readonly string[],
  hashed: boolean,
): Promise<{ sha256: string; bytes: number; peakRssMiB: number }> {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"] });
  const hash = createHash("sha256");
  let bytes = 0;
  let peak = 0;
  const poll = setInterval(() => {
    if (child.pid !== undefined) {
      // VmHWM, the peak so far; a process that has gone counts 0.
      void statusMiB(child.pid, "VmHWM").then(
        (mib) => {
          peak = Math.max(peak, mib);
        },
        () => undefined,
      );
    }
  }, 10);
  child.stdout.on("data", (chunk: Buffer) => {
    bytes += chunk.byteLength;
    if (hashed) hash.update(chunk);
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => {
      clearInterval(poll);
      if (code !== 0) reject(new Error(`${command} ${args.join(" ")} exited ${code}`));
      else resolve({ sha256: hash.digest("hex"), bytes, peakRssMiB: peak });
    });
  });
}

/** writeRandomFile writes `bytes` random bytes to `path` in 1 MiB pieces and returns their sha256. */
async function writeRandomFile(path: string, bytes: number): Promise<string> {
  const hash = createHash("sha256");
  const out = createWriteStream(path);
  for (let written = 0; written < bytes; written += MiB) {
    const piece = randomBytes(Math.min(MiB, bytes - written));
    hash.update(piece);
    if (!out.write(piece)) await once(out, "drain");
  }
  out.end();
  await once(out, "close");
  return hash.digest("hex");
}

/**
 * dropCachedPages asks the kernel to drop `path`'s clean pages from the page cache (GNU dd's
 * `iflag=nocache` with nothing copied: posix_fadvise DONTNEED on the whole file), so the next
 * read of it comes from the disk.
 */
async function dropCachedPages(path: string): Promise<void> {
  const child = spawn("dd", [`if=${path}`, "iflag=nocache", "count=0", "status=none"], {
    stdio: "inherit",
  });
  const [code] = (await once(child, "close")) as [number | null];
  if (code !== 0) throw new Error(`dd iflag=nocache of ${path} exited ${code}`);
}

/** largestFileUnder returns the path of the largest file below dir (a store's one big blob). */
async function largestFileUnder(dir: string): Promise<string> {
  let best = { path: "", size: -1 };
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const { size } = await stat(path);
    if (size > best.size) best = { path, size };
  }
  return best.path;
}

/**
 * cliCatScenarios measure `spillway-cli cat` of a 1 GiB output (random bytes, filesystem
 * backend) into a pipe this process reads. Each run starts the CLI afresh, as a person's
 * command does, so its start-up counts, and each row carries each side's median peak RSS
 * (`peak_rss_mib`): the CLI streams, so its memory stays far below the output's size.
 * - `cli_cat_disk_1gib`, the bar of "streams at disk speed": the blob's pages are dropped from
 *   the page cache before every run, so the server reads it from the disk, against
 *   `dd iflag=direct bs=4M` of the same bytes (the disk's own speed, no page cache) into the
 *   same counting reader.
 * - `cli_cat_count_1gib`: the blob cached, against coreutils `cat` of the same bytes from the
 *   page cache, the reader only counting (the command's cost when the disk is not the limit).
 * - `cli_cat_1gib`: the same with the reader hashing every byte, a third busy process beside
 *   the server and the CLI on the machine's cores; every run's sha256 checked.
 * Every run's byte count is checked.
 */
export async function cliCatScenarios(opts: {
  runs: number;
  bytes: number;
}): Promise<BenchResult[]> {
  return withFilesystemSpillway("cli-cat", async ({ dir, server, client }) => {
    const file = join(dir, "payload.bin");
    const expected = await writeRandomFile(file, opts.bytes);
    const stored = await client.offload(
      { tenant: "dev", runId: "bench-cli", callId: "cat" },
      createReadStream(file, { highWaterMark: MiB }),
      { expectedSize: BigInt(opts.bytes) },
    );
    const blob = await largestFileUnder(join(dir, "store"));
    const cli = [spillwayCliBin, "--url", server.url, "cat", "bench-cli", stored.handle];
    const fromCache = {
      command: "cat",
      args: [file],
      label: "coreutils cat of the same bytes from the page cache",
    };
    const rows: BenchResult[] = [];
    for (const { name, hashed, minRatio, reader, baseline, cold } of [
      {
        name: "cli_cat_disk_1gib",
        hashed: false,
        minRatio: 0.8,
        reader: "counts",
        baseline: {
          command: "dd",
          args: [`if=${file}`, "iflag=direct", "bs=4M", "status=none"],
          label: "dd iflag=direct bs=4M of the same bytes (the disk's speed, no page cache)",
        },
        cold: true,
      },
      {
        name: "cli_cat_count_1gib",
        hashed: false,
        minRatio: 0.3,
        reader: "counts",
        baseline: fromCache,
        cold: false,
      },
      {
        name: "cli_cat_1gib",
        hashed: true,
        minRatio: 0.2,
        reader: "hashes",
        baseline: fromCache,
        cold: false,
      },
    ]) {
      const rss = { spillway: [] as number[], baseline: [] as number[] };
      const check = (side: "spillway" | "baseline") => (out: Awaited<ReturnType<typeof drain>>) => {
        if (out.bytes !== opts.bytes || (hashed && out.sha256 !== expected)) {
          throw new Error(`${name} ${side}: read ${out.bytes} bytes, sha256 ${out.sha256}`);
        }
        rss[side].push(out.peakRssMiB);
      };
      const timed = await alternate(
        opts.runs,
        async () => {
          // Timed with the run: a few milliseconds, against Spillway.
          if (cold) await dropCachedPages(blob);
          check("spillway")(await drain(process.execPath, cli, hashed));
        },
        async () => check("baseline")(await drain(baseline.command, baseline.args, hashed)),
      );
      const row = throughputResult({
        name,
        baseline: `${baseline.label}, into the same pipe (the reader ${reader})`,
        bytes: opts.bytes,
        ...timed,
        minRatio,
      });
      // Run 0 is the untimed warm-up of each side.
      rows.push({
        ...row,
        peak_rss_mib: {
          spillway: Math.round(median(rss.spillway.slice(1))),
          baseline: Math.round(median(rss.baseline.slice(1))),
        },
      });
    }
    return rows;
  });
}
