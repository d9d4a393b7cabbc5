import type { Logger } from "pino";
import type { Metrics } from "./metrics.js";
import type { SpillwayServer } from "./server.js";

/**
 * reloadOnHangup is what `spillway serve` does on SIGHUP: it re-reads the token file and the
 * TLS certificate, key and client CA bundle (those configured), each on its own, and logs what
 * happened. A file
 * that cannot be used is logged at error with its setting and path, and what was in force
 * stays in force: a broken token file keeps the tokens, a broken certificate keeps the
 * certificate, and one failing never keeps the other from reloading. Connections already open
 * keep the certificate they were made with. With `metrics`, each reload is counted in
 * `spillway_config_reloads_total` by file and result, so a failed one can be alerted on.
 */
export function reloadOnHangup(
  server: Pick<SpillwayServer, "reloadTokens" | "reloadTls">,
  log: Logger,
  metrics?: Pick<Metrics, "configReloads">,
): void {
  const count = (file: "token_file" | "tls", result: "ok" | "failed") =>
    metrics?.configReloads.inc({ file, result });
  try {
    const tokens = server.reloadTokens();
    if (tokens !== undefined) {
      log.info({ tokens }, "token file reloaded");
      count("token_file", "ok");
    }
  } catch (err) {
    log.error({ err }, "token file reload failed; the previous tokens stay in force");
    count("token_file", "failed");
  }
  try {
    if (server.reloadTls()) {
      log.info("TLS certificate reloaded");
      count("tls", "ok");
    }
  } catch (err) {
    log.error({ err }, "TLS certificate reload failed; the previous certificate stays in force");
    count("tls", "failed");
  }
}
