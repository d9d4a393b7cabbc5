import type { Logger } from "pino";
import type { Backend } from "./backends/backend.js";

/** How long the startup check of the bucket's lifecycle rule may take. */
const checkTimeoutMs = 10_000;

/**
 * checkIncompleteUploadExpiry asks the backend, when it has multipart uploads, to make sure
 * the store aborts incomplete ones after `days` days (`Backend.expireIncompleteUploads`), and
 * logs what it found. It never fails the start: a store that refuses the rule, missing
 * permissions or an unreachable store are logged as a warning, and the sweep still removes
 * the uploads it can list. `days` 0 leaves the bucket's configuration alone.
 */
export async function checkIncompleteUploadExpiry(
  backend: Backend,
  days: number,
  log: Logger,
): Promise<void> {
  if (days === 0 || backend.expireIncompleteUploads === undefined) return;
  try {
    const outcome = await backend.expireIncompleteUploads(days, {
      signal: AbortSignal.timeout(checkTimeoutMs),
    });
    log.info(
      { days, outcome },
      outcome === "added"
        ? "added a bucket lifecycle rule that aborts incomplete multipart uploads"
        : "a bucket lifecycle rule aborts incomplete multipart uploads",
    );
  } catch (err) {
    log.warn(
      { err, days },
      "cannot make the bucket abort incomplete multipart uploads; only the sweep removes those it can list (MinIO expires the rest itself after MINIO_API_STALE_UPLOADS_EXPIRY)",
    );
  }
}
