import { describe, expect, it } from "vitest";
import { payloadBytes } from "./payload.js";

describe("payloadBytes", () => {
  it("builds every kind of payload deterministically", () => {
    const text = (b: Uint8Array) => Buffer.from(b).toString("utf8");
    expect(text(payloadBytes({ text: "é\n" }))).toBe("é\n");
    expect(text(payloadBytes({ base64: "aGk=" }))).toBe("hi");
    expect([...payloadBytes({ hex: "00ff" })]).toEqual([0, 255]);
    expect(text(payloadBytes({ json: { a: [1, 2] } }))).toBe('{"a":[1,2]}');
    expect(text(payloadBytes({ repeat: "line %d\n", count: 3 }))).toBe("line 1\nline 2\nline 3\n");
    const cycle = payloadBytes({ byteCycle: 258 });
    expect([cycle[0], cycle[255], cycle[256], cycle[257]]).toEqual([0, 255, 0, 1]);
    expect(payloadBytes(undefined).byteLength).toBe(0);
  });
});
