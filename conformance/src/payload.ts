import { Code, ConnectError } from "@connectrpc/connect";

/**
 * PayloadSpec describes a payload in data, deterministically, so another language can build
 * the same bytes: literal text, base64, hex, compact JSON, a repeated template (`%d` becomes
 * the 1-based repetition number) or a cycle of every byte value (`byteCycle` bytes of
 * 0, 1, …, 255, 0, …; never valid UTF-8 from 128 bytes on).
 */
export type PayloadSpec =
  | { readonly text: string }
  | { readonly base64: string }
  | { readonly hex: string }
  | { readonly json: unknown }
  | { readonly repeat: string; readonly count: number }
  | { readonly byteCycle: number };

/** payloadBytes builds the bytes a PayloadSpec describes; the same spec always gives the same bytes. */
export function payloadBytes(spec: PayloadSpec | undefined): Uint8Array {
  if (spec === undefined) return new Uint8Array(0);
  if ("text" in spec) return Buffer.from(spec.text, "utf8");
  if ("base64" in spec) return Buffer.from(spec.base64, "base64");
  if ("hex" in spec) return Buffer.from(spec.hex, "hex");
  if ("json" in spec) return Buffer.from(JSON.stringify(spec.json), "utf8");
  if ("repeat" in spec) {
    const parts: string[] = [];
    for (let i = 1; i <= spec.count; i++) parts.push(spec.repeat.replaceAll("%d", String(i)));
    return Buffer.from(parts.join(""), "utf8");
  }
  if ("byteCycle" in spec) {
    const out = new Uint8Array(spec.byteCycle);
    for (let i = 0; i < out.length; i++) out[i] = i % 256;
    return out;
  }
  throw new ConnectError(`unknown payload spec ${JSON.stringify(spec)}`, Code.InvalidArgument);
}
