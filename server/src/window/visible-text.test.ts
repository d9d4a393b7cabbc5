import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  clipVisible,
  hasAnsiBytes,
  nextAnsiByte,
  stripAnsiBytes,
  stripChunk,
} from "./visible-text.js";

const vectors = (
  JSON.parse(
    readFileSync(new URL("../../../conformance/ansi-strip-vectors.json", import.meta.url), "utf8"),
  ) as { vectors: { name: string; input: string; stripped: string }[] }
).vectors;

describe("stripAnsiBytes", () => {
  it.each(vectors.map((v) => [v.name, v] as const))("vector %s over UTF-8", (_name, v) => {
    expect(stripAnsiBytes(Buffer.from(v.input, "utf8")).toString("utf8")).toBe(v.stripped);
  });

  it("finds C1 introducers only in their UTF-8 form, not in other 0xC2 characters", () => {
    expect(hasAnsiBytes(Buffer.from("\u00a0 \u00b0 \u0085"))).toBe(false);
    expect(hasAnsiBytes(Buffer.from("\u00a0\u009b1m"))).toBe(true);
    expect(nextAnsiByte(Buffer.from("\u00a0x\u001b["), 0)).toBe(3);
  });
});

describe("clipVisible", () => {
  const colored = Buffer.from("\u001b[31mhello\u001b[0m world");

  it("counts only visible characters and takes in the sequences after the last one", () => {
    const clip = clipVisible(colored, 5);
    expect(clip.kept.toString()).toBe("hello");
    expect(clip.chars).toBe(5);
    expect(clip.end).toBe(colored.indexOf(" "));
    expect(clip.more).toBe(true);
    const all = clipVisible(colored, 100);
    expect(all.kept.toString()).toBe("hello world");
    expect(all.end).toBe(colored.length);
    expect(all.more).toBe(false);
  });

  it("stops before a sequence cut by the end unless nothing follows", () => {
    const cut = Buffer.from("ab\u001b[3");
    expect(clipVisible(cut, 10)).toMatchObject({ end: 2, more: false });
    expect(clipVisible(cut, 10, true)).toMatchObject({ end: cut.length, more: false });
  });

  it("leaves a character cut by the end out, and still to come", () => {
    const cut = Buffer.from("\u001b[1m\u00e9").subarray(0, 5);
    expect(clipVisible(cut, 10)).toMatchObject({ end: 4, chars: 0, more: true });
  });
});

describe("stripChunk", () => {
  it("maps every offset of the stripped text back to the chunk and line starts forward", () => {
    const chunk = Buffer.from("a\u001b[31mbc\u001b[0m\nd\u001b]0;t\u0007e\u009b1mf\n");
    const s = stripChunk(chunk);
    expect(s.text.toString()).toBe("abc\ndef\n");
    const text = s.text.toString();
    for (let at = 0; at < text.length; at++) {
      expect(String.fromCharCode(chunk[s.toChunk(at)] ?? 0)).toBe(text[at]);
    }
    const secondLine = chunk.indexOf(10) + 1;
    expect(s.toText(secondLine)).toBe(4);
    expect(s.toText(0)).toBe(0);
  });
});
