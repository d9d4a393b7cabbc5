import { readdirSync } from "node:fs";
import type { Logger } from "pino";
import { reservedSegmentPrefix } from "./backends/object-key.js";

/** The names a filesystem store keeps at its root: keys begin with `t/`. */
const ownNames = new Set(["t", "lost+found"]);

/**
 * checkDataRoot logs what a filesystem store's root says about being the right directory,
 * before the server takes calls: at info that it is empty (a new store, or a volume that did
 * not mount, whose old handles would all answer PERMISSION_DENIED), and at warn the entries no
 * Spillway server makes there (a restore unpacked a level too deep leaves its `data/` there).
 * It never refuses: an empty directory is also every new store's start.
 */
export function checkDataRoot(root: string, log: Logger): void {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  const foreign = names.filter(
    (name) => !ownNames.has(name) && !name.startsWith(reservedSegmentPrefix),
  );
  if (foreign.length > 0) {
    log.warn(
      { dataDir: root, entries: foreign.slice(0, 10), more: Math.max(0, foreign.length - 10) },
      "the data directory holds entries no Spillway server makes there: is it the right directory (a restore unpacked one level too deep)?",
    );
  } else if (!names.includes("t")) {
    log.info(
      { dataDir: root },
      "the data directory holds no outputs: a new store (if it should hold some, check that its volume is mounted)",
    );
  }
}
