/** Tokens up to this many bytes, plain ASCII without escapes, are interned. */
const internMaxBytes = 64;
/** Slots of the intern table (a power of two); a slot holds the last string hashed to it. */
const internSlots = 4096;
const interned: (string | undefined)[] = new Array(internSlots).fill(undefined);

/**
 * decodeJsonString decodes a string token as written (quotes and escapes included), a member
 * name or a string value, to its text.
 *
 * Guarantees: the result is what JSON.parse gives for the token (escaped lone surrogates
 * included). A short plain-ASCII token that was decoded recently returns the same string
 * without allocating: a scan meets the same member names and enum-like values millions of
 * times, and decoding each afresh was a large part of its garbage.
 */
export function decodeJsonString(raw: Uint8Array): string {
  const close = raw.length - 1;
  if (close <= internMaxBytes) {
    let hash = close;
    let i = 1;
    for (; i < close; i++) {
      const b = raw[i] as number;
      if (b === 0x5c || b >= 0x80) break;
      hash = Math.imul(hash ^ b, 0x01000193);
    }
    if (i === close) {
      const slot = (hash >>> 0) & (internSlots - 1);
      const cached = interned[slot];
      if (cached !== undefined && sameAscii(cached, raw)) return cached;
      const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString(
        "latin1",
        1,
        close,
      );
      interned[slot] = text;
      return text;
    }
  }
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  if (!text.includes(0x5c)) return text.toString("utf8", 1, close);
  return JSON.parse(text.toString("utf8")) as string;
}

/** True when `text` is the ASCII between the quotes of `raw`. */
function sameAscii(text: string, raw: Uint8Array): boolean {
  if (text.length !== raw.length - 2) return false;
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) !== raw[i + 1]) return false;
  }
  return true;
}
