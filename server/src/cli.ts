import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { constants as osConstants } from "node:os";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { BACKEND_FLAGS, backendFromOptions } from "./backend-config.js";
import { defaultLimits } from "./limits.js";
import { startSpillwayServer } from "./server.js";
import { createSpillwayCore, SPILLWAY_VERSION } from "./service.js";
import { createSweeper } from "./sweeper.js";
import { checkIncompleteUploadExpiry } from "./upload-expiry.js";
import { spillwayUsage } from "./usage.js";
import { createWindowCaps } from "./window/caps.js";

const usage = spillwayUsage(SPILLWAY_VERSION);

const flags = {
  ...BACKEND_FLAGS,
  host: "SPILLWAY_HOST",
  port: "SPILLWAY_PORT",
  "token-file": "SPILLWAY_TOKEN_FILE",
  "tls-cert": "SPILLWAY_TLS_CERT",
  "tls-key": "SPILLWAY_TLS_KEY",
  "tls-client-ca": "SPILLWAY_TLS_CLIENT_CA",
  "max-blob-bytes": "SPILLWAY_MAX_BLOB_BYTES",
  "max-run-bytes": "SPILLWAY_MAX_RUN_BYTES",
  "inline-bytes": "SPILLWAY_INLINE_BYTES",
  "max-window-lines": "SPILLWAY_MAX_WINDOW_LINES",
  "max-window-chars": "SPILLWAY_MAX_WINDOW_CHARS",
  "max-line-chars": "SPILLWAY_MAX_LINE_CHARS",
  "max-bytes-window": "SPILLWAY_MAX_BYTES_WINDOW",
  "sweep-interval-ms": "SPILLWAY_SWEEP_INTERVAL_MS",
  "drain-delay-ms": "SPILLWAY_DRAIN_DELAY_MS",
  "grace-ms": "SPILLWAY_GRACE_MS",
  "store-probe-interval-ms": "SPILLWAY_STORE_PROBE_INTERVAL_MS",
  "max-connection-age-ms": "SPILLWAY_MAX_CONNECTION_AGE_MS",
  "max-calls-per-tenant": "SPILLWAY_MAX_CALLS_PER_TENANT",
  "request-deadline-ms": "SPILLWAY_REQUEST_DEADLINE_MS",
  "max-inflight-bytes": "SPILLWAY_MAX_INFLIGHT_BYTES",
  "max-inflight-bytes-per-tenant": "SPILLWAY_MAX_INFLIGHT_BYTES_PER_TENANT",
  "idle-stream-ms": "SPILLWAY_IDLE_STREAM_MS",
  "connection-idle-ms": "SPILLWAY_CONNECTION_IDLE_MS",
  "keepalive-ms": "SPILLWAY_KEEPALIVE_MS",
  "keepalive-timeout-ms": "SPILLWAY_KEEPALIVE_TIMEOUT_MS",
  "metrics-port": "SPILLWAY_METRICS_PORT",
  "metrics-host": "SPILLWAY_METRICS_HOST",
  "orphan-age-ms": "SPILLWAY_ORPHAN_AGE_MS",
  "abort-incomplete-uploads-days": "SPILLWAY_ABORT_INCOMPLETE_UPLOADS_DAYS",
} as const;
type Flag = keyof typeof flags;

/**
 * Reads a whole-number flag from its option or environment variable; undefined when neither is
 * set. Anything but decimal digits is refused naming the flag (and the variable it came from):
 * `Number` would read "" or " " as 0, which turned a limit off when a template left a variable
 * empty.
 */
function intOption(
  values: Record<string, string | undefined>,
  flag: Flag,
  range: { min?: number; max?: number } = {},
): number | undefined {
  const fromFlag = values[flag];
  const raw = fromFlag ?? process.env[flags[flag]];
  if (raw === undefined) return undefined;
  const name = fromFlag === undefined ? `--${flag} (${flags[flag]})` : `--${flag}`;
  const n = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n)) {
    throw new Error(`${name}: expected a whole number, got ${JSON.stringify(raw)}`);
  }
  if (range.min !== undefined && n < range.min) {
    throw new Error(`${name}: must be at least ${range.min}, got ${n}`);
  }
  if (range.max !== undefined && n > range.max) {
    throw new Error(`${name}: must be at most ${range.max}, got ${n}`);
  }
  return n;
}

/**
 * Reads an on/off switch from the environment: `1` or `true` is on, `0`, `false` or unset is
 * off; anything else (an empty value included) is refused naming the variable.
 */
function switchFromEnv(variable: string): boolean {
  const raw = process.env[variable];
  if (raw === undefined || raw === "0" || raw === "false") return false;
  if (raw === "1" || raw === "true") return true;
  throw new Error(`${variable}: expected 1, true, 0 or false, got ${JSON.stringify(raw)}`);
}

/**
 * runMcpCommand runs `spillway mcp` and `spillway mcp-proxy` as the `spillway-mcp` and
 * `spillway-mcp-proxy` executables of the @spillway/mcp package, in a process of their own with
 * this one's stdio, arguments and environment, and takes on their exit code. The MCP server and
 * proxy are clients of Spillway, so they ship in that separate package and never load into the
 * server's process (biome.json keeps the server from importing any client package); without
 * the package installed beside the server the command says so and exits 2.
 */
function runMcpCommand(command: "mcp" | "mcp-proxy", args: readonly string[]): void {
  let bin: string;
  try {
    bin = createRequire(import.meta.url)
      .resolve("@spillway/mcp/package.json")
      .replace(/package\.json$/, `bin/spillway-${command}.js`);
  } catch {
    process.stderr.write(
      `spillway: ${command} runs spillway-${command} of the @spillway/mcp package, which is not installed beside the server; install it (docs/mcp.md)\n`,
    );
    process.exitCode = 2;
    return;
  }
  const child = spawn(process.execPath, [bin, ...args], { stdio: "inherit" });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => child.kill(signal));
  }
  child.on("exit", (code, signal) => {
    process.exitCode = code ?? (signal === null ? 1 : 128 + (osConstants.signals[signal] ?? 0));
  });
}

async function main(argv: string[]): Promise<void> {
  // Before the flags are parsed: `spillway mcp --url ...` would otherwise end on an unknown flag.
  if (argv[0] === "mcp" || argv[0] === "mcp-proxy") {
    runMcpCommand(argv[0], argv.slice(1));
    return;
  }
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...Object.fromEntries(Object.keys(flags).map((f) => [f, { type: "string" as const }])),
      help: { type: "boolean", short: "h" },
      inspector: { type: "boolean" },
      version: { type: "boolean" },
    },
  });
  const command = positionals[0];
  if (values.version === true) {
    process.stdout.write(`spillway ${SPILLWAY_VERSION}\n`);
    return;
  }
  if (values.help === true || command === "help") {
    process.stdout.write(usage);
    return;
  }
  if (command !== "serve" && command !== "sweep") {
    // A usage error: stdout stays empty for whoever pipes it, and the exit says so.
    const problem = command === undefined ? "no command" : `unknown command "${command}"`;
    process.stderr.write(`spillway: ${problem}\n${usage}`);
    process.exitCode = 2;
    return;
  }
  const given = values as Record<string, string | undefined>;
  const opt = (flag: Flag): string | undefined => given[flag] ?? process.env[flags[flag]];
  const int = (flag: Flag, range?: { min?: number; max?: number }) => intOption(given, flag, range);
  const orphanAgeMs = int("orphan-age-ms") ?? 60 * 60 * 1000;
  if (command === "sweep") {
    await sweepOnce(opt, orphanAgeMs);
    return;
  }

  // Every flag is read before anything starts, so a bad value never leaves a replica that
  // listened, or swept, before it failed.
  const sweepIntervalMs = int("sweep-interval-ms", { min: 1 }) ?? 60_000;
  const graceMs = int("grace-ms") ?? 10_000;
  const configuredDrainDelayMs = int("drain-delay-ms") ?? 5_000;
  const port = int("port", { max: 65_535 }) ?? 50051;
  const abortIncompleteUploadsDays = int("abort-incomplete-uploads-days") ?? 1;
  // Written as each line comes: with pino's default buffer, the flush at exit retried a stdout
  // whose reader was gone (EPIPE) forever, so the process never exited.
  const log = pino(
    { name: "spillway", level: process.env.SPILLWAY_LOG_LEVEL ?? "info" },
    pino.destination({ dest: 1, sync: true }),
  );
  const { backend, kind } = await backendFromOptions(opt);
  await checkIncompleteUploadExpiry(backend, abortIncompleteUploadsDays, log);

  const certFile = opt("tls-cert");
  const keyFile = opt("tls-key");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new Error("--tls-cert and --tls-key go together");
  }
  const limits = {
    ...defined("maxBlobBytes", int("max-blob-bytes")),
    ...defined("inlineBytes", int("inline-bytes")),
    ...defined("maxRunBytes", int("max-run-bytes")),
    ...defined("idleStreamMs", int("idle-stream-ms")),
  };
  if (limits.idleStreamMs === 0) {
    throw new Error("--idle-stream-ms: must be above 0; every call needs a bound on its client");
  }
  const caps = {
    ...defined("maxWindowLines", int("max-window-lines")),
    ...defined("maxWindowChars", int("max-window-chars")),
    ...defined("maxLineChars", int("max-line-chars")),
    ...defined("maxBytesWindow", int("max-bytes-window")),
  };
  const inspector = values.inspector === true || switchFromEnv("SPILLWAY_INSPECTOR");
  const metricsPort = int("metrics-port", { max: 65_535 });
  // prom-client is loaded only when metrics are asked for.
  const metrics =
    metricsPort === undefined ? undefined : (await import("./metrics.js")).createMetrics();
  const server = await startSpillwayServer({
    backend,
    host: opt("host") ?? "127.0.0.1",
    port,
    tokenFile: opt("token-file"),
    tls:
      certFile !== undefined && keyFile !== undefined
        ? { certFile, keyFile, clientCaFile: opt("tls-client-ca") }
        : undefined,
    limits,
    caps,
    logger: log,
    ...defined("maxCallsPerTenant", int("max-calls-per-tenant", { min: 1 })),
    ...defined("maxInflightBytes", int("max-inflight-bytes")),
    ...defined("requestDeadlineMs", int("request-deadline-ms")),
    ...defined("maxInflightBytesPerTenant", int("max-inflight-bytes-per-tenant")),
    ...defined("connectionIdleMs", int("connection-idle-ms")),
    ...defined("keepaliveMs", int("keepalive-ms")),
    ...defined("keepaliveTimeoutMs", int("keepalive-timeout-ms", { min: 1 })),
    ...defined("maxConnectionAgeMs", int("max-connection-age-ms")),
    ...defined("storeProbeIntervalMs", int("store-probe-interval-ms")),
    ...(metrics === undefined ? {} : { metrics }),
    inspector,
  });
  const metricsServer =
    metrics === undefined || metricsPort === undefined
      ? undefined
      : await (await import("./metrics-server.js")).startMetricsServer({
          host: opt("metrics-host") ?? "127.0.0.1",
          port: metricsPort,
          registry: metrics.registry,
        });
  if (metricsServer !== undefined) log.info({ url: metricsServer.url }, "metrics served");
  const sweeper = createSweeper(server.core, {
    intervalMs: sweepIntervalMs,
    orphanAgeMs,
    log,
    ...(metrics === undefined ? {} : { metrics }),
  });
  sweeper.start();
  let stopping = false;
  const shutdown = (signal: string) => {
    // SIGINT is someone at a terminal, not a load balancer's orchestrator: no delay.
    const drainDelayMs = signal === "SIGINT" ? 0 : configuredDrainDelayMs;
    if (stopping) {
      // A repeated signal must not kill a drain half-way (Node's default for a signal with no
      // listener); a SIGINT ends what is left of the delay.
      log.info({ signal }, "already draining");
      if (drainDelayMs === 0) void server.close(graceMs, 0);
      return;
    }
    stopping = true;
    log.info({ signal, drainDelayMs, graceMs }, "draining");
    void sweeper
      .stop()
      .then(() => server.close(graceMs, drainDelayMs))
      .then(() => metricsServer?.close())
      .then(() => {
        log.info("stopped");
        process.exit(0);
      });
  };
  process.on("SIGHUP", () => {
    try {
      server.reloadTokens();
      log.info("token file reloaded");
    } catch (err) {
      log.error({ err }, "token file reload failed; the previous tokens stay in force");
    }
  });
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // Only now: whoever starts the server on this line may signal it at once, and a signal
  // that comes before its handler is installed kills the process outright.
  log.info(
    { url: server.url, backend: kind, auth: opt("token-file") === undefined ? "dev" : "tokens" },
    `spillway ${SPILLWAY_VERSION} listening on ${server.url}`,
  );
  if (inspector) log.info({ url: `${server.url}/inspector/` }, "inspector served");
}

/** Runs one sweep over the configured backend and prints its report as one JSON line. */
async function sweepOnce(
  opt: (flag: Flag) => string | undefined,
  orphanAgeMs: number,
): Promise<void> {
  // A sweep of a directory that is not there would sweep nothing and say so with exit 0.
  const { backend } = await backendFromOptions(opt, { createDataDir: false });
  try {
    const core = createSpillwayCore({
      backend,
      limits: defaultLimits,
      caps: createWindowCaps(),
    });
    // intervalMs is unused: the sweeper's timer is never started here. Refused entries are
    // logged to stderr; stdout carries the report alone.
    const log = pino({ name: "spillway", level: "warn" }, pino.destination(2));
    const report = await createSweeper(core, { intervalMs: 60_000, orphanAgeMs, log }).sweepOnce();
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await backend.close();
  }
}

function defined<K extends string>(key: K, value: number | undefined): { [P in K]?: number } {
  return value === undefined ? {} : ({ [key]: value } as { [P in K]?: number });
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`spillway: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
