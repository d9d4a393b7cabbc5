import { createHash } from "node:crypto";
import type { SpillwayClient } from "@spillway/client";

/** sha256 returns the lowercase hex SHA-256 of data, as records report it. */
export function sha256(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/**
 * readBack reads the whole payload behind handle in raw byte windows, so a test can compare it
 * with what it offloaded byte for byte.
 */
export async function readBack(
  client: SpillwayClient,
  runId: string,
  handle: string,
): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let offset = 0n;
  for (;;) {
    const win = await client.readToolOutput({
      runId,
      handle,
      omitRendered: true,
      window: { case: "bytes", value: { offset } },
    });
    for (const frame of win.frames) {
      if (frame.frame.case === "content" && frame.frame.value.body.case === "data") {
        parts.push(frame.frame.value.body.value);
      }
    }
    const next = win.trailer?.nextOffset;
    if (win.trailer?.eof === true || next === undefined) return Buffer.concat(parts);
    offset = next;
  }
}
