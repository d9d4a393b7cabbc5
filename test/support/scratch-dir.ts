import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/**
 * scratchDir creates a fresh directory under the OS temp dir and removes it, with everything
 * in it, once the enclosing file or `describe` has run. Call it at module or `describe` level,
 * where vitest accepts `afterAll`; a test run leaves nothing behind in the temp dir.
 */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
