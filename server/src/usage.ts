import { BACKEND_USAGE } from "./backend-config.js";

/**
 * The help text after its version line: the commands and every flag with its environment
 * variable and default. `spillway --help` prints it, and docs/operations.md carries it verbatim
 * between generated markers, so both come from this one string.
 */
export const USAGE_BODY = `
Usage: spillway serve [flags]
       spillway sweep [backend flags] [--orphan-age-ms <duration>] [--log-level <level>]
       spillway mcp [flags] | spillway mcp-proxy [flags] -- <command> [args...]
       spillway runs | ls | stat | cat | head | tail | grep | put | rm | fork | merge | ttl [flags] [args]
       spillway token add <tenant> --token-file <path> [limit flags]
       spillway --help | help | --version | version

serve answers gRPC calls and sweeps every --sweep-interval-ms. sweep runs one sweep and exits:
it removes expired runs and outputs, blobs no output refers to and leftovers of interrupted
writes (temp files, incomplete multipart uploads) older than --orphan-age-ms (default 1h;
0 removes every orphan, so run it only while no offload is in flight), then prints the report
as one JSON line. mcp and mcp-proxy run spillway-mcp and spillway-mcp-proxy of the
@spillway/mcp package, installed beside the server (their flags: --help, docs/mcp.md). runs,
ls, stat, cat, head, tail, grep, put, rm, fork, merge and ttl run spillway-cli of the
@spillway/cli package, a client of a running server (--url, SPILLWAY_URL, SPILLWAY_TOKEN; docs/cli.md).
token add prints a new token once and appends its SHA-256 and the tenant, with
--max-blob-bytes, --max-run-bytes, --max-inflight-bytes or --max-calls as given, to the token
file (created with mode 0600); send the server SIGHUP to load it.
On SIGHUP, serve re-reads the token file and the TLS certificate, key and client CA bundle:
new connections get the new certificate, open ones keep theirs; a file that cannot be used is
logged at error with its path, and what was in force stays in force.

Flags (each also read from the environment variable shown; a bad or empty value, or a file or
directory that cannot be used, stops the server before it listens, naming the flag and path):
  <n>         a whole decimal number
  <size>      bytes: a whole number, or a number and a unit: B; kB, MB, GB, TB (1000, 1000^2,
              1000^3, 1000^4 bytes); KiB, MiB, GiB, TiB (1024, 1024^2, 1024^3, 1024^4 bytes);
              e.g. 10GiB, 1.5MB, 65536. Units are case-sensitive; K, KB, G, Gb and the like are
              refused as ambiguous, and so are fractions of a byte
  <duration>  milliseconds: a whole number (5000), or a number and one of ms, s, m (minutes),
              h, d (30s, 1.5m, 2h)
${BACKEND_USAGE}  --host <address>                SPILLWAY_HOST         default 127.0.0.1
  --port <port>                   SPILLWAY_PORT         default 50051
  --workers <n>                   SPILLWAY_WORKERS      serve from this many processes sharing the
                                                        port, each a replica with its own limits;
                                                        default one a core (1 with --backend
                                                        memory); /metrics sums the workers' metrics
  --token-file <path>             SPILLWAY_TOKEN_FILE   lines "<sha256 hex of token> <tenant>
                                                        [max_blob_bytes=<size>] [max_run_bytes=<size>]
                                                        [max_inflight_bytes=<size>] [max_calls=<n>]";
                                                        without it: loopback only, tenant "dev";
                                                        a file with no token line is a warning
                                                        (every call is refused until SIGHUP)
  --tls-cert <pem> --tls-key <pem> SPILLWAY_TLS_CERT / SPILLWAY_TLS_KEY  serve TLS instead of h2c
  --tls-client-ca <pem>           SPILLWAY_TLS_CLIENT_CA  require client certificates (mTLS)
  --max-blob-bytes <size>         SPILLWAY_MAX_BLOB_BYTES  bytes one output may hold, default 8GiB
  --max-run-bytes <size>          SPILLWAY_MAX_RUN_BYTES  payload bytes one run may hold; unset: no limit
  --inline-bytes <size>           SPILLWAY_INLINE_BYTES  outputs up to this size are stored inside
                                                        their record, default 16KiB
  --max-window-lines <n>          SPILLWAY_MAX_WINDOW_LINES   default 1000
  --max-window-chars <n>          SPILLWAY_MAX_WINDOW_CHARS   default 50000, at most 1000000 (so that a
                                                        window fits a 4 MiB reply)
  --max-line-chars <n>            SPILLWAY_MAX_LINE_CHARS     default 2000
  --max-bytes-window <size>       SPILLWAY_MAX_BYTES_WINDOW   bytes one bytes window returns, default 4GiB
  --sweep-interval-ms <duration>  SPILLWAY_SWEEP_INTERVAL_MS  default 60000; at least 1
  --drain-delay-ms <duration>     SPILLWAY_DRAIN_DELAY_MS     on SIGTERM, health answers NOT_SERVING
                                                        while every call is still served this long,
                                                        default 5000 (SIGINT skips it)
  --grace-ms <duration>           SPILLWAY_GRACE_MS           then the listener closes and in-flight
                                                        calls get this long to finish, default 10000
  --store-probe-interval-ms <duration> SPILLWAY_STORE_PROBE_INTERVAL_MS  probe the store this often; health
                                                        is NOT_SERVING while it fails, default 5000;
                                                        0 = off
  --max-connection-age-ms <duration> SPILLWAY_MAX_CONNECTION_AGE_MS  GOAWAY after about this long (±10 %),
                                                        default 1800000; 0 = never
  --max-calls-per-tenant <n>      SPILLWAY_MAX_CALLS_PER_TENANT  calls in flight per tenant, default 256;
                                                        at least 1
  --max-inflight-bytes <size>     SPILLWAY_MAX_INFLIGHT_BYTES  bytes held for offloads and reads in
                                                        flight, default 1GiB (an n-th of it in
                                                        each of n --workers); 0 = no limit
  --max-inflight-bytes-per-tenant <size> SPILLWAY_MAX_INFLIGHT_BYTES_PER_TENANT  the share of them one
                                                        tenant may hold; default a quarter with a
                                                        token file, all in dev mode; 0 = no limit
  --idle-stream-ms <duration>     SPILLWAY_IDLE_STREAM_MS  end a call that waits this long on its client
                                                        (next Offload message, a request, a reader)
                                                        with DEADLINE_EXCEEDED, default 60000
  --connection-idle-ms <duration> SPILLWAY_CONNECTION_IDLE_MS  GOAWAY to a connection with no open
                                                        stream this long, default 300000; 0 = never
  --keepalive-ms <duration>       SPILLWAY_KEEPALIVE_MS  PING each connection this often, default
                                                        60000; 0 = off
  --keepalive-timeout-ms <duration> SPILLWAY_KEEPALIVE_TIMEOUT_MS  close a connection whose peer leaves a
                                                        PING unanswered this long, default 20000;
                                                        at least 1
  --request-deadline-ms <duration> SPILLWAY_REQUEST_DEADLINE_MS  end calls still running this long with
                                                        DEADLINE_EXCEEDED; unset or 0: none
  --inspector                     SPILLWAY_INSPECTOR    serve the browser inspector at /inspector/ on the
                                                        same port and auth (docs/inspector.md);
                                                        env 1/true or 0/false; default off
  --metrics-port <port>           SPILLWAY_METRICS_PORT  serve Prometheus GET /metrics; unset: off
  --metrics-host <address>        SPILLWAY_METRICS_HOST  default 127.0.0.1
  --log-level <level>             SPILLWAY_LOG_LEVEL     trace, debug (each call), info, warn, error,
                                                        fatal or silent; default info (sweep: warn)
  --abort-incomplete-uploads-days <n>  SPILLWAY_ABORT_INCOMPLETE_UPLOADS_DAYS  at start, make sure a
                                                        bucket lifecycle rule aborts incomplete
                                                        multipart uploads after n days (s3 backend;
                                                        adds one if none), default 1; 0 = leave
                                                        the bucket's lifecycle alone
  --orphan-age-ms <duration>      SPILLWAY_ORPHAN_AGE_MS  age before an orphan blob or a leftover
                                                        is swept, default 3600000
`;

/** spillwayUsage is what `spillway --help` prints: the version line, then {@link USAGE_BODY}. */
export function spillwayUsage(version: string): string {
  return `spillway ${version}\n${USAGE_BODY}`;
}
