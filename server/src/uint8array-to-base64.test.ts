import { randomBytes } from "node:crypto";
import { base64Encode } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { installUint8ArrayToBase64, uint8ArrayToBase64 } from "./uint8array-to-base64.js";

const encode = (bytes: Uint8Array, options?: Parameters<typeof uint8ArrayToBase64>[0]) =>
  uint8ArrayToBase64.call(bytes, options);

describe("uint8ArrayToBase64", () => {
  it("encodes RFC 4648's test vectors, padded unless omitPadding", () => {
    const vectors: [string, string][] = [
      ["", ""],
      ["f", "Zg=="],
      ["fo", "Zm8="],
      ["foo", "Zm9v"],
      ["foob", "Zm9vYg=="],
      ["fooba", "Zm9vYmE="],
      ["foobar", "Zm9vYmFy"],
    ];
    for (const [text, base64] of vectors) {
      const bytes = new TextEncoder().encode(text);
      expect(encode(bytes)).toBe(base64);
      expect(encode(bytes, { alphabet: "base64url" })).toBe(base64);
      expect(encode(bytes, { omitPadding: true })).toBe(base64.replace(/=+$/, ""));
    }
  });

  it("uses - and _ in base64url, + and / in base64", () => {
    const bytes = Uint8Array.of(0xfb, 0xff, 0xbf);
    expect(encode(bytes)).toBe("+/+/");
    expect(encode(bytes, { alphabet: "base64url" })).toBe("-_-_");
  });

  it("encodes a view at an offset of a larger buffer, not the whole buffer", () => {
    const whole = new TextEncoder().encode("xxfoobarxx");
    expect(encode(whole.subarray(2, 8))).toBe("Zm9vYmFy");
  });

  it("agrees with @bufbuild/protobuf's own encoder on random bytes of every length mod 3", () => {
    for (const size of [1, 2, 3, 1000, 1001, 1002, 65_537]) {
      const bytes = randomBytes(size);
      expect(encode(bytes)).toBe(base64Encode(bytes, "std"));
      expect(encode(bytes, { omitPadding: true })).toBe(base64Encode(bytes, "std_raw"));
      expect(encode(bytes, { alphabet: "base64url", omitPadding: true })).toBe(
        base64Encode(bytes, "url"),
      );
    }
  });

  it("throws a TypeError for an unknown alphabet or a receiver that is no Uint8Array", () => {
    expect(() => encode(Uint8Array.of(1), { alphabet: "hex" as "base64" })).toThrow(TypeError);
    expect(() => uint8ArrayToBase64.call([1, 2, 3])).toThrow(TypeError);
  });

  it("is installed on Uint8Array.prototype, not enumerable, and only where none exists", () => {
    const proto = Uint8Array.prototype as { toBase64?: unknown };
    const before = proto.toBase64;
    installUint8ArrayToBase64();
    const installed = proto.toBase64;
    expect(typeof installed).toBe("function");
    if (before !== undefined) expect(installed).toBe(before);
    expect(Object.keys(Uint8Array.prototype)).not.toContain("toBase64");
    installUint8ArrayToBase64();
    expect(proto.toBase64).toBe(installed);
  });
});
