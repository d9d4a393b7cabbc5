import { readFile } from "node:fs/promises";
import { median } from "./result.js";

/**
 * Clock ticks per second in /proc/<pid>/stat: USER_HZ, which Linux fixes at 100 for user space
 * whatever the kernel's own tick rate.
 */
const userHz = 100;

/**
 * CpuSeconds is where one run's time went: `wall` is its elapsed seconds, every other key a
 * measured process (by label) and the CPU seconds, user plus system, it used meanwhile.
 */
export type CpuSeconds = Readonly<Record<string, number>>;

/**
 * MeteredProcess names what a meter reads: a process id, `"self"` (this process), or several
 * processes read as one (a server's primary and its workers).
 */
export type MeteredProcess = number | "self" | readonly number[];

/**
 * cpuSecondsOf returns the CPU time, user plus system and over all its threads, that process
 * `pid` has used so far, from /proc/<pid>/stat; `"self"` is this process (process.cpuUsage);
 * a list of processes is their sum.
 *
 * Guarantees: the figure only grows while the process runs; it throws when /proc has no such
 * process, so a meter never reports a process that has gone as idle.
 */
export async function cpuSecondsOf(pid: MeteredProcess): Promise<number> {
  if (typeof pid === "object") {
    const each = await Promise.all(pid.map((one) => cpuSecondsOf(one)));
    return each.reduce((sum, seconds) => sum + seconds, 0);
  }
  if (pid === "self") {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1e6;
  }
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) is in parentheses and may hold spaces: count from after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
  return (Number(fields[11]) + Number(fields[12])) / userHz;
}

/**
 * meterCpu runs `fn` and returns its elapsed seconds (`wall`) and the CPU seconds each of
 * `processes` used meanwhile (a benchmark's server, its object store, and `"self"` for the
 * benchmark process with its client or baseline). With two cores, a total near twice `wall`
 * means the run was bound by CPU, not by waiting.
 */
export async function meterCpu(
  processes: Readonly<Record<string, MeteredProcess>>,
  fn: () => Promise<unknown>,
): Promise<CpuSeconds> {
  const measured = Object.entries(processes);
  const read = () => Promise.all(measured.map(([, pid]) => cpuSecondsOf(pid)));
  const before = await read();
  const started = process.hrtime.bigint();
  await fn();
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  const after = await read();
  return {
    wall,
    ...Object.fromEntries(
      measured.map(([label], i) => [label, (after[i] ?? 0) - (before[i] ?? 0)]),
    ),
  };
}

/** medianCpu returns, key by key, the median of several runs' CpuSeconds. */
export function medianCpu(runs: readonly CpuSeconds[]): CpuSeconds {
  const keys = [...new Set(runs.flatMap((run) => Object.keys(run)))];
  return Object.fromEntries(
    keys.map((key) => [key, round2(median(runs.map((run) => run[key] ?? 0)))]),
  );
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

/** SideCpu collects each timed run's CpuSeconds, per side of a scenario. */
export interface SideCpu {
  readonly spillway: CpuSeconds[];
  readonly baseline: CpuSeconds[];
}

/**
 * metered wraps one side's run so that every run but the untimed warm-up (run 0, see
 * alternate) meters `processes` and records its CpuSeconds in `into[side]`.
 */
export function metered(
  processes: Readonly<Record<string, MeteredProcess>>,
  into: SideCpu,
  side: keyof SideCpu,
  fn: (run: number) => Promise<unknown>,
): (run: number) => Promise<void> {
  return async (run) => {
    const used = await meterCpu(processes, () => fn(run));
    if (run > 0) into[side].push(used);
  };
}
