import { randomBytes } from "node:crypto";

/**
 * textPayload returns `bytes` of log-like text (numbered lines of varied length), built once
 * and reused so generating it is never part of a measurement.
 */
export function textPayload(bytes: number): Buffer {
  const out = Buffer.allocUnsafe(bytes);
  let offset = 0;
  let line = 1;
  while (offset < bytes) {
    const text = `${line} ${"INFO request served path=/api/v1/items status=200 ".repeat(1 + (line % 3))}\n`;
    offset += out.write(text, offset);
    line++;
  }
  return out;
}

/** randomPayload returns `bytes` of incompressible random bytes. */
export function randomPayload(bytes: number): Buffer {
  return randomBytes(bytes);
}
