import cluster from "node:cluster";
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { ConnectError } from "@connectrpc/connect";
import { pino } from "pino";
import { createAuthenticator } from "./auth.js";
import { BACKEND_FLAGS, backendFromOptions } from "./backend-config.js";
import { createOptionReader } from "./cli-options.js";
import { argumentProblem, suggestCommand } from "./command-suggestion.js";
import { loadTlsCredentials } from "./config-files.js";
import { checkDataRoot } from "./data-root-check.js";
import { reloadOnHangup } from "./hangup-reload.js";
import { callWeights, defaultLimits, type ServerLimits } from "./limits.js";
import {
  CLIENT_COMMAND_NAMES,
  clientCommandAt,
  MCP_COMMANDS,
  packageCommandFor,
  runPackageCommand,
} from "./package-command.js";
import { checkCapsFitReplies } from "./reply-size.js";
import {
  isFirstWorker,
  onPrimaryGone,
  reportListening,
  superviseWorkers,
  WORKER_INDEX_ENV,
  type WorkerRestartReason,
} from "./serve-workers.js";
import { DEFAULT_MAX_INFLIGHT_BYTES, isLoopback, startSpillwayServer } from "./server.js";
import { createSpillwayCore, SPILLWAY_VERSION } from "./service.js";
import { createSweeper } from "./sweeper.js";
import { runTokenCommand } from "./token-command.js";
import { checkIncompleteUploadExpiry } from "./upload-expiry.js";
import { spillwayUsage } from "./usage.js";
import { createWindowCaps, type WindowCaps } from "./window/caps.js";
import { escapeControls } from "./window/render.js";

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
  "log-level": "SPILLWAY_LOG_LEVEL",
  workers: "SPILLWAY_WORKERS",
} as const;
type Flag = keyof typeof flags;

/**
 * `SPILLWAY_` variables other programs of the project read (the SDKs and the CLI's client
 * commands, spillway-mcp, the test tooling): not serve's, but not mistakes either.
 */
const OTHER_PROGRAMS_VARIABLES = new Set([
  "SPILLWAY_TOKEN",
  "SPILLWAY_URL",
  "SPILLWAY_TENANT",
  "SPILLWAY_RUN_ID",
  "SPILLWAY_TLS_CA",
  "SPILLWAY_SCREENSHOTS",
  "SPILLWAY_CACHE",
  "SPILLWAY_CHROMIUM",
  WORKER_INDEX_ENV,
]);

/**
 * Warns of each `SPILLWAY_` variable in `env` that neither serve nor another program of the
 * project reads, with the serve variable it most likely meant: a misspelt
 * `SPILLWAY_TOKEN_FILE` would otherwise start dev mode without a word.
 */
function warnUnknownVariables(log: pino.Logger, env: NodeJS.ProcessEnv): void {
  const known = [...Object.values(flags), "SPILLWAY_INSPECTOR"];
  for (const name of Object.keys(env)) {
    if (!name.startsWith("SPILLWAY_") || known.includes(name as never)) continue;
    if (OTHER_PROGRAMS_VARIABLES.has(name) || name.startsWith("SPILLWAY_MCP_")) continue;
    const guess = suggestCommand(
      name.toLowerCase(),
      known.map((k) => k.toLowerCase()),
    )?.toUpperCase();
    log.warn(
      { variable: name, ...(guess === undefined ? {} : { meant: guess }) },
      `${name} is not a variable spillway serve reads, so it is ignored${guess === undefined ? "" : `; did you mean ${guess}?`}`,
    );
  }
}

/** The commands `spillway` knows, for the guess after an unknown one. */
const COMMANDS = [
  "serve",
  "sweep",
  "help",
  "version",
  "token",
  ...MCP_COMMANDS.map((c) => c.command),
  ...CLIENT_COMMAND_NAMES,
];

/**
 * Words people type for a command that edit distance would map elsewhere: `start` (as in
 * `npm start`) is one letter from the client command `stat` but means `serve`.
 */
const COMMAND_ALIASES: ReadonlyMap<string, string> = new Map([["start", "serve"]]);

/** The flags `spillway sweep` reads; any other given on its command line is a mistake. */
const SWEEP_FLAGS: readonly string[] = [
  ...Object.keys(BACKEND_FLAGS),
  "orphan-age-ms",
  "log-level",
];

/** pino's levels, most verbose first, and `silent`. */
const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

async function main(argv: string[]): Promise<void> {
  // Before the flags are parsed: `spillway mcp --url ...` or `spillway cat --url ...` would
  // otherwise end on an unknown flag.
  // spillway-cli also takes its global flags before the command: `spillway --url <url> ls run`.
  const packageCommand =
    packageCommandFor(argv[0]) ?? packageCommandFor(argv[clientCommandAt(argv)]);
  if (packageCommand !== undefined) {
    // spillway-cli takes the command's name first; the MCP executables are one command each.
    runPackageCommand(packageCommand, packageCommand.bin === "spillway-cli" ? argv : argv.slice(1));
    return;
  }
  if (argv[0] === "token") {
    process.exitCode = runTokenCommand(argv.slice(1));
    return;
  }
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    usageError(argumentProblem(err, [...Object.keys(flags), "help", "inspector", "version"]));
    return;
  }
  const { positionals, values } = parsed;
  const command = positionals[0];
  if (values.version === true || command === "version") {
    process.stdout.write(`spillway ${SPILLWAY_VERSION}\n`);
    return;
  }
  if (values.help === true || command === "help") {
    process.stdout.write(usage);
    return;
  }
  if (command !== "serve" && command !== "sweep") {
    // A usage error: stdout stays empty for whoever pipes it, and the exit says so.
    const guess =
      command === undefined
        ? undefined
        : (COMMAND_ALIASES.get(command) ?? suggestCommand(command, COMMANDS));
    const problem =
      command === undefined
        ? "no command"
        : `unknown command "${command}"${guess === undefined ? "" : `; did you mean "${guess}"?`}`;
    usageError(problem);
    return;
  }
  if (positionals.length > 1) {
    usageError(`unexpected argument "${positionals[1]}" after ${command}`);
    return;
  }
  const options = createOptionReader<Flag>(values, flags);
  const { int, bytes, ms, timer, name } = options;
  const opt = options.text;
  const logLevel = options.oneOf("log-level", LOG_LEVELS);
  const orphanAgeMs = ms("orphan-age-ms") ?? 60 * 60 * 1000;
  if (command === "sweep") {
    const misplaced = Object.keys(values).find(
      (flag) => (flag in flags || flag === "inspector") && !SWEEP_FLAGS.includes(flag),
    );
    if (misplaced !== undefined) {
      usageError(
        `--${misplaced} does not apply to sweep, which reads the backend flags, --orphan-age-ms and --log-level`,
      );
      return;
    }
    await sweepOnce(opt, name, options.given, orphanAgeMs, logLevel ?? "warn");
    return;
  }

  // Every flag is read before anything starts, so a bad value never leaves a replica that
  // listened, or swept, before it failed.
  const sweepIntervalMs = timer("sweep-interval-ms", { min: 1 }) ?? 60_000;
  const graceMs = timer("grace-ms") ?? 10_000;
  const configuredDrainDelayMs = timer("drain-delay-ms") ?? 5_000;
  const port = int("port", { max: 65_535 }) ?? 50051;
  const abortIncompleteUploadsDays = int("abort-incomplete-uploads-days") ?? 1;
  // Written as each line comes: with pino's default buffer, the flush at exit retried a stdout
  // whose reader was gone (EPIPE) forever, so the process never exited.
  const log = pino(
    { name: "spillway", level: logLevel ?? "info" },
    pino.destination({ dest: 1, sync: true }),
  );
  if (process.env[WORKER_INDEX_ENV] === undefined) warnUnknownVariables(log, process.env);
  const certFile = opt("tls-cert");
  const keyFile = opt("tls-key");
  if ((certFile === undefined) !== (keyFile === undefined)) {
    const [set, unset]: [Flag, Flag] =
      certFile === undefined ? ["tls-key", "tls-cert"] : ["tls-cert", "tls-key"];
    throw new Error(`${name(set)} is set but --${unset} is not; they go together`);
  }
  if (certFile === undefined && opt("tls-client-ca") !== undefined) {
    // Without TLS the server would listen in plaintext and never ask for a client certificate.
    throw new Error(
      `${name("tls-client-ca")} is set but --tls-cert and --tls-key are not; client certificates need TLS`,
    );
  }
  const fileNames = {
    tokenFile: name("token-file"),
    cert: name("tls-cert"),
    key: name("tls-key"),
    clientCa: name("tls-client-ca"),
  };
  const tls =
    certFile !== undefined && keyFile !== undefined
      ? { certFile, keyFile, clientCaFile: opt("tls-client-ca") }
      : undefined;
  // Every flag below is checked before the backend is built, so a bad value leaves no data
  // directory made. The server reads the files again as it starts (and the token file's limits
  // against its own).
  if (tls !== undefined) loadTlsCredentials(tls, fileNames);
  const tokenFile = opt("token-file");
  if (tokenFile !== undefined) createAuthenticator({ tokenFile, name: fileNames.tokenFile });
  // 0 is not "no limit" for these: it refused every offload, and every call needs a bound on
  // its client.
  const limits = {
    ...defined("maxBlobBytes", bytes("max-blob-bytes", { min: 1 })),
    ...defined("inlineBytes", bytes("inline-bytes")),
    ...defined("maxRunBytes", bytes("max-run-bytes", { min: 1 })),
    ...defined("idleStreamMs", timer("idle-stream-ms", { min: 1 })),
  };
  const caps = {
    ...defined("maxWindowLines", int("max-window-lines", { min: 1 })),
    ...defined("maxWindowChars", int("max-window-chars", { min: 1 })),
    ...defined("maxLineChars", int("max-line-chars", { min: 1 })),
    ...defined("maxBytesWindow", bytes("max-bytes-window", { min: 1 })),
  };
  checkWindowCaps(caps, name);
  const inspector = values.inspector === true || switchFromEnv("SPILLWAY_INSPECTOR", "--inspector");
  const metricsPort = int("metrics-port", { max: 65_535 });
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port) {
    throw new Error(
      `${name("metrics-port")} is ${metricsPort}, the port calls are served on (${name("port")}); give metrics a port of their own`,
    );
  }
  const askedWorkers = int("workers", { min: 1, max: 1024 });
  // One process a core, as nginx's `worker_processes auto`; a memory store cannot be shared.
  const memory = opt("backend") === "memory";
  const workers = askedWorkers ?? (memory ? 1 : availableParallelism());
  if (workers > 1 && memory) {
    // Each worker would hold its own store: an output offloaded to one is missing from the rest.
    throw new Error(
      `${name("workers")} above 1 needs a store the workers share (filesystem or s3), not --backend memory`,
    );
  }
  // Read here, before the workers start, so that a bad value stops the first process once
  // rather than each worker after "starting workers".
  const host = opt("host") ?? "127.0.0.1";
  if (tokenFile === undefined && !isLoopback(host)) {
    throw new Error(
      `${name("host")}: refusing to listen on ${host} without a token file: dev mode serves loopback only`,
    );
  }
  const givenInflightBytes = bytes("max-inflight-bytes");
  const maxInflightBytes = givenInflightBytes ?? workerShare(workers);
  const maxInflightBytesPerTenant = bytes("max-inflight-bytes-per-tenant");
  checkInflightFits(
    { ...defaultLimits, ...limits },
    [
      ["max-inflight-bytes", givenInflightBytes, maxInflightBytes ?? DEFAULT_MAX_INFLIGHT_BYTES],
      ["max-inflight-bytes-per-tenant", maxInflightBytesPerTenant, undefined],
    ],
    name,
  );
  const serverOptions = {
    ...defined("maxCallsPerTenant", int("max-calls-per-tenant", { min: 1 })),
    ...defined("maxInflightBytes", maxInflightBytes),
    ...defined("requestDeadlineMs", timer("request-deadline-ms")),
    ...defined("maxInflightBytesPerTenant", maxInflightBytesPerTenant),
    ...defined("connectionIdleMs", timer("connection-idle-ms")),
    ...defined("keepaliveMs", timer("keepalive-ms")),
    ...defined("keepaliveTimeoutMs", timer("keepalive-timeout-ms", { min: 1 })),
    ...defined("maxConnectionAgeMs", timer("max-connection-age-ms")),
    ...defined("storeProbeIntervalMs", timer("store-probe-interval-ms")),
  };
  keepCreatedFilesPrivate();
  const { backend, kind } = await backendFromOptions(opt, { name, given: options.given });
  await checkIncompleteUploadExpiry(backend, abortIncompleteUploadsDays, log);
  const dataRoot =
    !cluster.isWorker && "root" in backend && typeof backend.root === "string"
      ? backend.root
      : undefined;
  const checkRoot = () => {
    if (dataRoot !== undefined) checkDataRoot(dataRoot, log);
  };

  // What ps and pidof show: `kill -HUP "$(pidof spillway)"` reaches the primary (or the one
  // process), which passes the signal on; the workers are named apart so that pidof finds one.
  process.title = cluster.isWorker ? "spillway-worker" : "spillway";
  if (workers > 1 && cluster.isPrimary) {
    // The store was reached and its flags checked once, here; every worker opens its own.
    await backend.close();
    // Metrics listen before any worker starts: a taken port then ends the start here, not after
    // the workers are forked (they would die with the primary's IPC channel, EPIPE).
    let onRestart: ((reason: WorkerRestartReason) => void) | undefined;
    if (metricsPort !== undefined) {
      // One scrape, every worker's metrics combined with the primary's own count of restarts.
      const { Counter, Registry } = await import("prom-client");
      const own = new Registry();
      const restarts = new Counter({
        name: "spillway_worker_restarts_total",
        help: "Workers started again by the primary: after one died (died), or a replacement that stopped before it listened (failed_to_start).",
        labelNames: ["reason"] as const,
        registers: [own],
      });
      onRestart = (reason) => restarts.inc({ reason });
      const { createWorkersMetrics } = await import("./workers-metrics.js");
      const summed = await (await import("./metrics-server.js")).startMetricsServer({
        host: opt("metrics-host") ?? "127.0.0.1",
        port: metricsPort,
        registry: createWorkersMetrics({ own }),
      });
      log.info({ url: summed.url, workers }, "metrics served");
    }
    superviseWorkers(workers, log, onRestart);
    // After it: the first line a primary prints is "starting workers", once it can be stopped.
    checkRoot();
    return;
  }
  checkRoot();
  // prom-client is loaded only when metrics are asked for.
  const metrics =
    metricsPort === undefined ? undefined : (await import("./metrics.js")).createMetrics();
  if (metrics !== undefined && cluster.isWorker) {
    // The primary serves the scrape; this worker answers it with its own registry.
    (await import("./workers-metrics.js")).answerMetricsRequests(metrics.registry);
  }
  const server = await startSpillwayServer({
    backend,
    host,
    port,
    tokenFile,
    tls,
    fileNames,
    limits,
    caps,
    logger: log,
    ...serverOptions,
    ...(metrics === undefined ? {} : { metrics }),
    inspector,
  });
  const metricsServer =
    metrics === undefined || metricsPort === undefined || cluster.isWorker
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
  // One sweeper a host: several would walk the same store for the same leftovers.
  if (isFirstWorker()) sweeper.start();
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
  process.on("SIGHUP", () => reloadOnHangup(server, log, metrics));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  // A worker whose primary is gone (killed outright) would serve on with no one to stop it.
  onPrimaryGone(() => shutdown("SIGTERM"));
  // Only now: whoever starts the server on this line may signal it at once, and a signal
  // that comes before its handler is installed kills the process outright.
  log.info(
    { url: server.url, backend: kind, auth: opt("token-file") === undefined ? "dev" : "tokens" },
    `spillway ${SPILLWAY_VERSION} listening on ${server.url}`,
  );
  if (inspector) log.info({ url: `${server.url}/inspector/` }, "inspector served");
  reportListening();
}

/** Runs one sweep over the configured backend and prints its report as one JSON line. */
async function sweepOnce(
  opt: (flag: Flag) => string | undefined,
  name: (flag: Flag) => string,
  given: (flag: Flag) => boolean,
  orphanAgeMs: number,
  logLevel: string,
): Promise<void> {
  // A store only a server's own process holds: a sweep here would report an empty store, exit 0.
  if (opt("backend") === "memory") {
    throw new Error(
      `${name("backend")} memory: the memory backend lives inside one serve process, which sweeps it itself; spillway sweep has nothing to sweep`,
    );
  }
  // A sweep of a directory that is not there would sweep nothing and say so with exit 0.
  keepCreatedFilesPrivate();
  const { backend } = await backendFromOptions(opt, { createDataDir: false, name, given });
  try {
    const core = createSpillwayCore({
      backend,
      limits: defaultLimits,
      caps: createWindowCaps(),
    });
    // intervalMs is unused: the sweeper's timer is never started here. Refused entries are
    // logged to stderr; stdout carries the report alone.
    const log = pino({ name: "spillway", level: logLevel }, pino.destination(2));
    const report = await createSweeper(core, { intervalMs: 60_000, orphanAgeMs, log }).sweepOnce();
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await backend.close();
  }
}

/**
 * Sets this process's umask to 077: the filesystem backend creates directories 0700 and files
 * 0600, and an inherited umask of 0277 or 0222 made them 0500 and 0400, so every offload failed
 * PERMISSION_DENIED in a tree the server had made itself while its health said SERVING.
 */
function keepCreatedFilesPrivate(): void {
  process.umask(0o077);
}

/**
 * Reads an on/off switch from the environment: `1` or `true` is on, `0`, `false` or unset is
 * off; anything else (an empty value included) is refused naming the variable.
 */
function switchFromEnv(variable: string, flag: string): boolean {
  const raw = process.env[variable];
  if (raw === undefined || raw === "0" || raw === "false") return false;
  if (raw === "1" || raw === "true") return true;
  throw new Error(
    `${flag} (${variable}): expected 1, true, 0 or false, got ${JSON.stringify(raw)}`,
  );
}

/** The flag that sets each window cap, for messages. */
const CAP_FLAGS: Readonly<Record<string, Flag>> = {
  maxWindowLines: "max-window-lines",
  maxWindowChars: "max-window-chars",
  maxLineChars: "max-line-chars",
  maxBytesWindow: "max-bytes-window",
};

/**
 * Checks the window caps as the server will (createWindowCaps), naming the flags rather than
 * the caps' field names in a refusal.
 */
function checkWindowCaps(caps: Partial<WindowCaps>, name: (flag: Flag) => string): void {
  try {
    checkCapsFitReplies(createWindowCaps(caps));
  } catch (err) {
    const message = ConnectError.from(err).rawMessage.replace(
      /\b(maxWindowLines|maxWindowChars|maxLineChars|maxBytesWindow)\b/g,
      (field) => name(CAP_FLAGS[field] as Flag),
    );
    throw new Error(message);
  }
}

/**
 * Checks that one call of each kind fits under the bytes-in-flight limits (0 turns one off),
 * naming the flags: an offload reserves a chunk and the inline buffer (--inline-bytes), so a
 * large --inline-bytes can exceed a limit its operator never set.
 */
function checkInflightFits(
  limits: ServerLimits,
  checks: readonly (readonly [Flag, given: number | undefined, fallback: number | undefined])[],
  name: (flag: Flag) => string,
): void {
  const weights = callWeights(limits);
  const heaviest = Math.max(weights.offload, weights.read);
  const reserve = `${heaviest} bytes one call reserves (a ${limits.maxChunkBytes}-byte chunk and ${limits.inlineBytes} of --inline-bytes)`;
  for (const [flag, given, fallback] of checks) {
    const limit = given ?? fallback;
    if (limit === undefined || limit === 0 || limit >= heaviest) continue;
    throw new Error(
      given === undefined
        ? `${name("inline-bytes")}: the ${reserve} are more than the default --${flag} of ${limit}; lower --inline-bytes or set --${flag}`
        : `${name(flag)}: ${limit} is below the ${reserve}; raise it, or use 0 to turn it off`,
    );
  }
}

/**
 * Reads the command line: the command, every flag as a string, the --inspector switch, --help
 * and --version.
 */
function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...Object.fromEntries(Object.keys(flags).map((f) => [f, { type: "string" as const }])),
      help: { type: "boolean", short: "h" },
      inspector: { type: "boolean" },
      version: { type: "boolean" },
    },
  });
}

/** Says a usage error on stderr with the usage, stdout left empty, and exits 2. */
function usageError(problem: string): void {
  process.stderr.write(`spillway: ${shownControls(problem)}\n\n${synopsis}\n${helpHint}\n`);
  process.exitCode = 2;
}

/**
 * The usage's "Usage:" lines alone: what a usage error shows under the problem, so that the
 * problem is not scrolled away by every flag's description.
 */
const synopsis = usage.slice(
  usage.indexOf("Usage:"),
  usage.indexOf("\n\n", usage.indexOf("Usage:")) + 1,
);
const helpHint = "Run `spillway --help` for every command and flag.";

/**
 * shownControls escapes the control characters of a message that may echo an argument (as
 * escapeControls does for model text), keeping its line breaks, so a hostile flag or command
 * name cannot drive the terminal it is shown on.
 */
function shownControls(text: string): string {
  return text.split("\n").map(escapeControls).join("\n");
}

function defined<K extends string>(key: K, value: number | undefined): { [P in K]?: number } {
  return value === undefined ? {} : ({ [key]: value } as { [P in K]?: number });
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(
    `spillway: ${shownControls(err instanceof Error ? err.message : String(err))}\n`,
  );
  process.exit(1);
});

/**
 * The bytes in flight a worker holds by default: the host's default budget shared by its
 * workers (at least 64 MiB each), so several workers hold no more than one server would.
 * Undefined for a single server, which takes the default itself.
 */
function workerShare(workers: number): number | undefined {
  if (workers <= 1) return undefined;
  return Math.max(64 * 1024 * 1024, Math.floor(DEFAULT_MAX_INFLIGHT_BYTES / workers));
}
