import { BACKEND_USAGE } from "./backend-config.js";

/**
 * The help text after its version line: the commands and every flag with its environment
 * variable and default. `spillway --help` prints it, and docs/operations.md carries it verbatim
 * between generated markers, so both come from this one string.
 */
export const USAGE_BODY = `
Usage: spillway serve [flags]
       spillway sweep [backend flags] [--orphan-age-ms <n>]
       spillway mcp [flags] | spillway mcp-proxy [flags] -- <command> [args...]
       spillway --help | --version

serve answers gRPC calls and sweeps every --sweep-interval-ms. sweep runs one sweep and exits:
it removes expired runs and outputs, blobs no output refers to and leftovers of interrupted
writes (temp files, incomplete multipart uploads) older than --orphan-age-ms (default 3600000;
0 removes every orphan, so run it only while no offload is in flight), then prints the report
as one JSON line. mcp and mcp-proxy run spillway-mcp and spillway-mcp-proxy of the
@spillway/mcp package, installed beside the server (their flags: --help, docs/mcp.md).

Flags (each also read from the environment variable shown; numbers are whole decimal numbers,
and a bad or empty value stops the server before it listens):
${BACKEND_USAGE}  --host <address>                SPILLWAY_HOST         default 127.0.0.1
  --port <port>                   SPILLWAY_PORT         default 50051
  --token-file <path>             SPILLWAY_TOKEN_FILE   lines "<sha256 hex of token> <tenant>
                                                        [max_blob_bytes=<n>] [max_run_bytes=<n>]
                                                        [max_inflight_bytes=<n>] [max_calls=<n>]";
                                                        without it: loopback only, tenant "dev"
  --tls-cert <pem> --tls-key <pem> SPILLWAY_TLS_CERT / SPILLWAY_TLS_KEY  serve TLS instead of h2c
  --tls-client-ca <pem>           SPILLWAY_TLS_CLIENT_CA  require client certificates (mTLS)
  --max-blob-bytes <n>            SPILLWAY_MAX_BLOB_BYTES
  --max-run-bytes <n>             SPILLWAY_MAX_RUN_BYTES  payload bytes one run may hold; unset: no limit
  --inline-bytes <n>              SPILLWAY_INLINE_BYTES
  --max-window-lines <n>          SPILLWAY_MAX_WINDOW_LINES   default 1000
  --max-window-chars <n>          SPILLWAY_MAX_WINDOW_CHARS   default 50000
  --max-line-chars <n>            SPILLWAY_MAX_LINE_CHARS     default 2000
  --max-bytes-window <n>          SPILLWAY_MAX_BYTES_WINDOW   bytes one bytes window returns, default 4 GiB
  --sweep-interval-ms <n>         SPILLWAY_SWEEP_INTERVAL_MS  default 60000; at least 1
  --drain-delay-ms <n>            SPILLWAY_DRAIN_DELAY_MS     on SIGTERM, health answers NOT_SERVING
                                                        while every call is still served for n ms,
                                                        default 5000 (SIGINT skips it)
  --grace-ms <n>                  SPILLWAY_GRACE_MS           then the listener closes and in-flight
                                                        calls get n ms to finish, default 10000
  --store-probe-interval-ms <n>   SPILLWAY_STORE_PROBE_INTERVAL_MS  probe the store every n ms; health
                                                        is NOT_SERVING while it fails, default 5000;
                                                        0 = off
  --max-connection-age-ms <n>     SPILLWAY_MAX_CONNECTION_AGE_MS  GOAWAY after ~n ms (±10 %),
                                                        default 1800000; 0 = never
  --max-calls-per-tenant <n>      SPILLWAY_MAX_CALLS_PER_TENANT  calls in flight per tenant, default 256;
                                                        at least 1
  --max-inflight-bytes <n>        SPILLWAY_MAX_INFLIGHT_BYTES  bytes held for offloads and reads in
                                                        flight, default 1073741824; 0 = no limit
  --max-inflight-bytes-per-tenant <n>  SPILLWAY_MAX_INFLIGHT_BYTES_PER_TENANT  the share of them one
                                                        tenant may hold; default a quarter with a
                                                        token file, all in dev mode; 0 = no limit
  --idle-stream-ms <n>            SPILLWAY_IDLE_STREAM_MS  end a call that waits this long on its client
                                                        (next Offload message, a request, a reader)
                                                        with DEADLINE_EXCEEDED, default 60000
  --connection-idle-ms <n>        SPILLWAY_CONNECTION_IDLE_MS  GOAWAY to a connection with no open
                                                        stream this long, default 300000; 0 = never
  --keepalive-ms <n>              SPILLWAY_KEEPALIVE_MS  PING each connection this often, default
                                                        60000; 0 = off
  --keepalive-timeout-ms <n>      SPILLWAY_KEEPALIVE_TIMEOUT_MS  close a connection whose peer leaves a
                                                        PING unanswered this long, default 20000;
                                                        at least 1
  --request-deadline-ms <n>       SPILLWAY_REQUEST_DEADLINE_MS  end calls still running after n ms with
                                                        DEADLINE_EXCEEDED; unset or 0: none
  --inspector                     SPILLWAY_INSPECTOR    serve the browser inspector at /inspector/ on the
                                                        same port and auth (docs/inspector.md);
                                                        env 1/true or 0/false; default off
  --metrics-port <port>           SPILLWAY_METRICS_PORT  serve Prometheus GET /metrics; unset: off
  --metrics-host <address>        SPILLWAY_METRICS_HOST  default 127.0.0.1
  --abort-incomplete-uploads-days <n>  SPILLWAY_ABORT_INCOMPLETE_UPLOADS_DAYS  at start, make sure a
                                                        bucket lifecycle rule aborts incomplete
                                                        multipart uploads after n days (s3 backend;
                                                        adds one if none), default 1; 0 = leave
                                                        the bucket's lifecycle alone
  --orphan-age-ms <n>             SPILLWAY_ORPHAN_AGE_MS  age before an orphan blob or a leftover
                                                        is swept, default 3600000
`;

/** spillwayUsage is what `spillway --help` prints: the version line, then {@link USAGE_BODY}. */
export function spillwayUsage(version: string): string {
  return `spillway ${version}\n${USAGE_BODY}`;
}
