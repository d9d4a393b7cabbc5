import { createHash, randomBytes } from "node:crypto";
import { open, rename } from "node:fs/promises";
import { join } from "node:path";

const CHUNK = 1024 * 1024;

/**
 * rawAtomicWrite is the baseline for offloads: what a runtime would do itself — hash the bytes,
 * write them to a temp file in 1 MiB writes, fsync, rename — and returns the sha256.
 */
export async function rawAtomicWrite(dir: string, name: string, data: Buffer): Promise<string> {
  const hash = createHash("sha256");
  const temp = join(dir, `.tmp-${randomBytes(6).toString("hex")}`);
  const file = await open(temp, "wx", 0o600);
  try {
    for (let i = 0; i < data.byteLength; i += CHUNK) {
      const chunk = data.subarray(i, i + CHUNK);
      hash.update(chunk);
      await file.write(chunk);
    }
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temp, join(dir, name));
  return hash.digest("hex");
}
