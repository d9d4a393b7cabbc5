import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { cpuSecondsOf, medianCpu, meterCpu } from "./process-cpu.js";

/** Spins until this process has used `ms` more milliseconds of user CPU. */
function spinCpu(ms: number): void {
  const end = process.cpuUsage().user + ms * 1000;
  while (process.cpuUsage().user < end) {}
}

/** A child that names itself `name`, uses `busyMs` of CPU, then waits to be killed. */
function busyChild(name: string, busyMs: number) {
  const script = `process.title = ${JSON.stringify(name)};
    const end = process.cpuUsage().user + ${busyMs * 1000};
    while (process.cpuUsage().user < end) {}
    process.stdout.write("done\\n"); setInterval(() => {}, 1000);`;
  return spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
}

describe("process CPU metering", () => {
  it("reads a process's CPU from /proc even when its name holds spaces and parentheses", async () => {
    const child = busyChild("a) b (c", 400);
    try {
      await once(child.stdout, "data");
      const pid = child.pid ?? -1;
      // The busy loop alone is 0.4 s of CPU; /proc counts in 10 ms ticks.
      expect(await cpuSecondsOf(pid)).toBeGreaterThanOrEqual(0.39);
      expect(await cpuSecondsOf(pid)).toBeLessThan(30);
    } finally {
      child.kill();
    }
  });

  it("reads several processes as one, their CPU summed", async () => {
    const children = [busyChild("one", 200), busyChild("two", 300)];
    try {
      await Promise.all(children.map((child) => once(child.stdout, "data")));
      const pids = children.map((child) => child.pid ?? -1);
      // Stopped, so that no CPU is used between the reads (a child's own threads still ran
      // after its busy loop: a CI run read 2.84 s each, then 2.85 s summed).
      for (const child of children) child.kill("SIGSTOP");
      const each = await Promise.all(pids.map((pid) => cpuSecondsOf(pid)));
      expect(await cpuSecondsOf(pids)).toBeCloseTo((each[0] ?? 0) + (each[1] ?? 0), 5);
      expect(await cpuSecondsOf(pids)).toBeGreaterThanOrEqual(0.49);
    } finally {
      // SIGKILL: a stopped process holds SIGTERM until it is continued.
      for (const child of children) child.kill("SIGKILL");
    }
  });

  it("refuses a process that has gone rather than report it idle", async () => {
    const child = busyChild("gone", 0);
    await once(child.stdout, "data");
    const pid = child.pid ?? -1;
    child.kill();
    await once(child, "exit");
    await expect(cpuSecondsOf(pid)).rejects.toThrow(/ENOENT/);
  });

  it("meters the CPU a run used and its elapsed time, per process", async () => {
    const used = await meterCpu({ bench: "self" }, async () => spinCpu(300));
    expect(used.bench).toBeGreaterThanOrEqual(0.3);
    // One thread spun: the run took at least that long, give or take the clocks' grain.
    expect(used.wall).toBeGreaterThanOrEqual(0.29);
  });

  it("takes medians key by key", () => {
    expect(
      medianCpu([
        { wall: 1, server: 3 },
        { wall: 2, server: 1 },
        { wall: 4, server: 2 },
      ]),
    ).toEqual({ wall: 2, server: 2 });
  });
});
