import { readFile, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";

const MiB = 1024 * 1024;

/** Reads one figure (kB) from a process's /proc status, in MiB. */
export async function statusMiB(pid: number, field: "VmRSS" | "VmHWM"): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1];
  if (kib === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return (Number(kib) * 1024) / MiB;
}

/**
 * meterPeakRss runs fn and returns what it returned with process pid's peak resident memory
 * meanwhile, in MiB: the kernel's high-water mark (VmHWM, reset first by writing 5 to
 * clear_refs, Linux >= 4.0) or the highest VmRSS sampled every 20 ms, whichever is higher (the
 * samples cover a kernel that cannot reset the mark).
 */
export async function meterPeakRss<T>(
  pid: number,
  fn: () => Promise<T>,
): Promise<{ result: T; peakMiB: number }> {
  const reset = await writeFile(`/proc/${pid}/clear_refs`, "5").then(
    () => true,
    () => false,
  );
  let sampled = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      sampled = Math.max(sampled, await statusMiB(pid, "VmRSS"));
      await sleep(20);
    }
  })();
  try {
    const result = await fn();
    return { result, peakMiB: Math.max(reset ? await statusMiB(pid, "VmHWM") : 0, sampled) };
  } finally {
    sampling = false;
    await sampler;
  }
}
