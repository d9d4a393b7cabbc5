import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { createSpillwayClient } from "@spillway/client";
import { afterEach, describe, expect, it } from "vitest";
import { readBack, sha256 } from "./support/read-back.js";
import { type SpillwayProcess, spawnSpillway, spillwayCli } from "./support/spawn-spillway.js";

/** The log lines of a server's stdout, parsed. */
function logLines(output: string): { pid: number; level: number; msg: string }[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { pid: number; level: number; msg: string });
}

/** The processes that logged that they listen, in order. */
const listeningPids = (output: string) =>
  logLines(output)
    .filter((line) => line.msg.includes(" listening on "))
    .map((line) => line.pid);

/** The processes that logged a call (debug level logs each call; a refused one logs a warning). */
const callingPids = (output: string) =>
  new Set(
    logLines(output)
      .filter((line) => "procedure" in line)
      .map((line) => line.pid),
  );

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Whether pid is a running process: an exited one left unreaped (a zombie) is not. */
const alive = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
};

describe("spillway serve --workers", () => {
  let dir = "";
  let server: SpillwayProcess | undefined;
  let taken: Server | undefined;
  /** Starts `serve --workers 2` (plus args) on a fresh data directory; resolves once both listen. */
  const startTwo = async (...args: string[]) => {
    if (dir === "") dir = await mkdtemp(join(tmpdir(), "spillway-workers-"));
    server = await spawnSpillway(["--data-dir", join(dir, "store"), "--workers", "2", ...args]);
    return server;
  };
  afterEach(async () => {
    server?.kill();
    await server?.exited;
    server = undefined;
    taken?.close();
    taken = undefined;
    if (dir !== "") await rm(dir, { recursive: true, force: true });
    dir = "";
  });

  it("serves from every worker on one port, replaces a killed one and stops them all on SIGTERM", async () => {
    const running = await startTwo("--log-level", "debug");
    const workers = listeningPids(running.output());
    expect(new Set(workers).size).toBe(2);
    expect(workers).not.toContain(running.pid);

    // Each client holds a connection of its own; the connections go to the workers in turn.
    const key = (i: number) => ({ tenant: "dev", runId: "shared", callId: `c${i}` });
    for (let i = 0; i < 6; i++) {
      await createSpillwayClient({ baseUrl: running.url }).offload(key(i), `output ${i}\n`);
    }
    expect(callingPids(running.output())).toEqual(new Set(workers));

    // A worker killed outright is started again, and what it committed stays readable.
    process.kill(workers[0] as number, "SIGKILL");
    await until(() => listeningPids(running.output()).length === 3, "a replacement worker");
    for (let i = 0; i < 6; i++) {
      const window = await createSpillwayClient({ baseUrl: running.url }).readToolOutput({
        runId: "shared",
        handle: `res_c${i}`,
      });
      expect(window.rendered).toContain(`output ${i}`);
    }

    // SIGTERM to the primary drains every worker; the primary exits 0 once they have.
    const all = listeningPids(running.output());
    await running.stop();
    expect(await running.exited).toEqual({ code: 0, signal: null });
    expect(all.filter(alive)).toEqual([]);
  });

  it("keeps serving when a replacement worker meets a token file a reload refused", async () => {
    const { hashToken } = await import("../server/src/auth.js");
    dir = await mkdtemp(join(tmpdir(), "spillway-workers-"));
    const tokenFile = join(dir, "tokens");
    writeFileSync(tokenFile, `${hashToken("good")} acme\n`);
    const running = await startTwo("--token-file", tokenFile, "--metrics-port", "0");
    const workers = listeningPids(running.output());
    const metricsUrl = (logLines(running.output()) as { msg: string; url?: string }[]).find(
      (l) => l.msg === "metrics served",
    )?.url as string;
    /** The value of the series `name{labels}` in one scrape, 0 when absent. */
    const scraped = async (series: string) =>
      Number(
        (await (await fetch(metricsUrl)).text())
          .split("\n")
          .find((line) => line.startsWith(`${series} `))
          ?.split(" ")
          .at(-1) ?? 0,
      );
    const call = () =>
      createSpillwayClient({ baseUrl: running.url, token: "good" }).raw.getServerInfo({});

    // A typo the reload refuses: the workers keep the tokens in force.
    writeFileSync(tokenFile, `${hashToken("good")} ../acme\n`);
    running.kill("SIGHUP");
    await until(() => running.output().includes("token file reload failed"), "the refused reload");
    // A worker dies (an OOM kill, say); its replacement reads the broken file and cannot start.
    process.kill(workers[0] as number, "SIGKILL");
    await until(
      () => running.output().includes("the others go on serving"),
      "the failed replacement",
    );
    expect(alive(running.pid)).toBe(true);
    expect((await call()).tenant).toBe("acme");
    // What an alert needs, beside the log lines: the refused reloads and the restarts.
    // Counted by each process: the one killed took its count with it.
    expect(await scraped('spillway_config_reloads_total{file="token_file",result="failed"}')).toBe(
      1,
    );
    expect(await scraped('spillway_worker_restarts_total{reason="died"}')).toBe(1);

    // Once the file is fixed, the next try starts a worker that listens.
    writeFileSync(tokenFile, `${hashToken("good")} acme\n`);
    await until(() => listeningPids(running.output()).length === 3, "a replacement worker");
    expect(running.output()).toContain("a replacement worker listens");
    expect((await call()).tenant).toBe("acme");
    expect(
      await scraped('spillway_worker_restarts_total{reason="failed_to_start"}'),
    ).toBeGreaterThan(0);
  });

  it("names its processes so that pidof finds the one to signal", async () => {
    const running = await startTwo();
    const workers = listeningPids(running.output());
    // pidof matches the name (comm) and the first word of the command line.
    const name = (pid: number) => readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    const argv0 = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0];
    expect([name(running.pid), argv0(running.pid)]).toEqual(["spillway", "spillway"]);
    for (const pid of workers) expect(name(pid)).toBe("spillway-worker");
  });

  it("gives one client's calls to every worker when the client opens a connection for each", async () => {
    const running = await startTwo("--log-level", "debug");
    const sdk = createSpillwayClient({ baseUrl: running.url, connections: 2 });
    // Calls at once, each an Offload stream of its own (larger than the SDK batches): each
    // starts on the connection with the fewest open.
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        sdk.offload({ tenant: "dev", runId: "one-client", callId: `c${i}` }, "x".repeat(200_000)),
      ),
    );
    expect(callingPids(running.output())).toEqual(new Set(listeningPids(running.output())));
  });

  it("gives each of n workers an n-th of the default bytes in flight, and a given limit whole", async () => {
    const limitOf = async (...args: string[]) => {
      const started = await startTwo(...args);
      const info = await createSpillwayClient({ baseUrl: started.url }).serverInfo();
      await started.stop();
      return info.limits?.maxInflightBytes;
    };
    expect(await limitOf()).toBe(BigInt(512 * 1024 * 1024));
    expect(await limitOf("--max-inflight-bytes", "1GiB")).toBe(BigInt(1024 * 1024 * 1024));
  });

  it("exits 0 on a SIGTERM that comes while its workers are still starting", async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-workers-"));
    const child = spawn(
      process.execPath,
      [spillwayCli, "serve", "--port", "0", "--data-dir", join(dir, "store"), "--workers", "2"],
      {
        env: { ...process.env, SPILLWAY_DRAIN_DELAY_MS: "0" },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = once(child, "exit");
    try {
      // The first line is the primary's "starting workers", before any worker can listen.
      await once(child.stdout, "data");
      child.kill("SIGTERM");
      expect(await exited).toEqual([0, null]);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("stops its workers when the primary is killed outright, once a call in flight has finished", async () => {
    const running = await startTwo("--grace-ms", "20000");
    const workers = listeningPids(running.output());
    const sdk = createSpillwayClient({ baseUrl: running.url });
    // A streamed offload that keeps sending for a second after the kill: a worker that drains
    // lets it finish; one that exits at once cuts it off.
    let killedAt: number | undefined;
    const sent: Buffer[] = [];
    let killAfterSome: () => void = () => {};
    const someSent = new Promise<void>((resolve) => {
      killAfterSome = resolve;
    });
    async function* slowly() {
      for (let i = 0; killedAt === undefined || i < killedAt + 20; i++) {
        const chunk = Buffer.alloc(64 * 1024, i % 251);
        sent.push(chunk);
        yield chunk;
        if (i === 5) killAfterSome();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const offloaded = sdk.offload({ tenant: "dev", runId: "orphaned", callId: "slow" }, slowly());
    await someSent;
    running.kill("SIGKILL");
    killedAt = sent.length;
    await running.exited;
    const stored = await offloaded;
    expect(stored.sha256).toBe(sha256(Buffer.concat(sent)));
    await until(() => workers.filter(alive).length === 0, "the orphaned workers to stop");
    // Each worker drained as on SIGTERM, having heard of the primary only through its channel.
    const draining = logLines(running.output()).filter((line) => line.msg === "draining");
    expect(new Set(draining.map((line) => line.pid))).toEqual(new Set(workers));

    // What the call committed reads back whole from the next server on the same data directory.
    const next = await spawnSpillway(["--data-dir", join(dir, "store")]);
    try {
      const again = createSpillwayClient({ baseUrl: next.url });
      const bytes = await readBack(again, "orphaned", stored.handle);
      expect(sha256(bytes)).toBe(sha256(Buffer.concat(sent)));
    } finally {
      await next.stop();
    }
  });

  it("exits 1 with every worker stopped when the workers cannot listen", async () => {
    const holder = createServer();
    taken = holder;
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const address = holder.address();
    const port = typeof address === "object" && address !== null ? address.port : 0;
    await expect(startTwo("--port", String(port))).rejects.toThrow(/exited \(1\) before listening/);
  });

  it("exits 1 before starting workers when its metrics port is taken", async () => {
    const holder = createServer();
    taken = holder;
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const address = holder.address();
    const port = typeof address === "object" && address !== null ? address.port : 0;
    dir = await mkdtemp(join(tmpdir(), "spillway-workers-"));
    const child = spawn(
      process.execPath,
      [spillwayCli, "serve", "--port", "0", "--data-dir", join(dir, "store")].concat([
        "--workers",
        "2",
        "--metrics-port",
        String(port),
      ]),
      { env: { ...process.env, SPILLWAY_DRAIN_DELAY_MS: "0" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    const [code] = await once(child, "exit");
    expect(code).toBe(1);
    expect(out).toContain("EADDRINUSE");
    // Workers forked first would die with the primary's IPC channel (unhandled EPIPE).
    expect(out).not.toContain("starting workers");
    expect(out).not.toContain("EPIPE");
  });

  it("runs a worker a core unless told, and one with the memory backend", async () => {
    dir = await mkdtemp(join(tmpdir(), "spillway-workers-"));
    const cores = availableParallelism();
    // Unset, as on an operator's machine: spawnSpillway otherwise asks for one process.
    server = await spawnSpillway(["--data-dir", join(dir, "store")], {
      SPILLWAY_WORKERS: undefined,
    });
    await until(() => listeningPids(server?.output() ?? "").length === cores, "every worker");
    expect(new Set(listeningPids(server.output())).size).toBe(cores);
    // One core is one process serving on its own; more are workers of a first process.
    if (cores > 1) expect(listeningPids(server.output())).not.toContain(server.pid);
    await server.stop();
    server = await spawnSpillway(["--backend", "memory"], { SPILLWAY_WORKERS: undefined });
    expect(listeningPids(server.output())).toEqual([server.pid]);
  });

  it("refuses the memory backend with more than one worker, whose stores would differ", async () => {
    const started = spawnSpillway(["--backend", "memory", "--workers", "2"]);
    await expect(started).rejects.toThrow(/exited \(1\) before listening/);
  });

  it("serves one /metrics with every worker's counts summed", async () => {
    const running = await startTwo("--metrics-port", "0", "--log-level", "debug");
    const lines = logLines(running.output()) as { msg: string; url?: string }[];
    const metricsUrl = lines.find((l) => l.msg === "metrics served")?.url;
    expect(metricsUrl).toBeDefined();
    for (let i = 0; i < 6; i++) {
      await createSpillwayClient({ baseUrl: running.url })
        .stat("none", `res_c${i}`)
        .catch(() => {});
    }
    expect(callingPids(running.output()).size).toBe(2);
    const text = await (await fetch(metricsUrl as string)).text();
    const started = text
      .split("\n")
      .filter(
        (line) => line.startsWith("grpc_server_started_total{") && line.includes("StatToolOutput"),
      )
      .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
    expect(started).toBe(6);
  });

  it("keeps /metrics answering, its counters never lower, while a worker is replaced", async () => {
    const running = await startTwo("--metrics-port", "0", "--log-level", "debug");
    const lines = logLines(running.output()) as { msg: string; url?: string }[];
    const metricsUrl = lines.find((l) => l.msg === "metrics served")?.url as string;
    for (let i = 0; i < 6; i++) {
      await createSpillwayClient({ baseUrl: running.url })
        .stat("none", `res_c${i}`)
        .catch(() => {});
    }
    expect(callingPids(running.output()).size).toBe(2);
    const scrape = async () => {
      const res = await fetch(metricsUrl);
      const text = await res.text();
      const sum = (prefix: string) =>
        text
          .split("\n")
          .filter((line) => line.startsWith(prefix))
          .reduce((total, line) => total + Number(line.split(" ").at(-1)), 0);
      return {
        status: res.status,
        started: sum("grpc_server_started_total{"),
        restarts: sum('spillway_worker_restarts_total{reason="died"}'),
      };
    };
    expect(await scrape()).toEqual({ status: 200, started: 6, restarts: 0 });
    const [victim] = listeningPids(running.output());
    process.kill(victim as number, "SIGKILL");
    // While the worker is gone and while its replacement starts: answered, and still 6.
    await until(() => !alive(victim as number), "the killed worker to exit");
    expect(await scrape()).toEqual({ status: 200, started: 6, restarts: 1 });
    await until(() => listeningPids(running.output()).length === 3, "the replacement");
    await createSpillwayClient({ baseUrl: running.url })
      .stat("none", "res_after")
      .catch(() => {});
    expect(await scrape()).toEqual({ status: 200, started: 7, restarts: 1 });
  });
});
