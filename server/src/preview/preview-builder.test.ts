import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createPreviewBuilder, type PreviewBuilderOptions } from "./preview-builder.js";
import { renderPreview } from "./render-preview.js";
import { createTextSniffer } from "./text-sniffer.js";

const encoder = new TextEncoder();
const bytesOf = (text: string) => encoder.encode(text).length;

/** Splits bytes into pieces of `size` (0 = one piece). */
function split(bytes: Uint8Array, size: number): Uint8Array[] {
  if (size === 0) return [bytes];
  const pieces: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.slice(i, i + size));
  return pieces;
}

/** Runs sniffer and builder over the pieces, as the offload pass does. */
function build(opts: PreviewBuilderOptions, pieces: Uint8Array[]) {
  const sniffer = createTextSniffer();
  const builder = createPreviewBuilder(opts);
  let size = 0;
  for (const piece of pieces) {
    sniffer.push(piece);
    builder.push(piece);
    size += piece.length;
  }
  return builder.finish({
    binary: sniffer.finish().binary,
    lineCount: 3,
    size,
    handle: "res_call1",
    name: "tool",
  });
}

/** The expected cut, computed independently on code point arrays. */
function expectedCut(text: string, headChars: number, tailChars: number) {
  const cps = Array.from(text);
  if (cps.length <= headChars + tailChars) return { head: text, tail: "", omitted: 0 };
  const head = cps.slice(0, headChars).join("");
  const tail = tailChars === 0 ? "" : cps.slice(-tailChars).join("");
  return { head, tail, omitted: bytesOf(text) - bytesOf(head) - bytesOf(tail) };
}

describe("createPreviewBuilder — text", () => {
  const payload = "a\r\nb😀e\u0301\r\n👍🏽ﬁ中\r\n\u2028x\u0300\u0301z\r\n🇫🇷end\r\n";

  it("cuts head and tail byte for byte on code points, for every chunking", () => {
    const bytes = encoder.encode(payload);
    for (let headChars = 0; headChars <= 12; headChars++) {
      for (let tailChars = 0; tailChars <= 12; tailChars++) {
        const want = expectedCut(payload, headChars, tailChars);
        for (const size of [0, 1, 2, 3, 5]) {
          const preview = build(
            { contentType: "text/plain", headChars, tailChars },
            split(bytes, size),
          );
          expect({
            head: preview.head,
            tail: preview.tail,
            omitted: Number(preview.omittedBytes),
          }).toEqual(want);
          expect(preview.binary).toBe(false);
          expect(preview.shape).toBe("");
        }
      }
    }
  });

  it("gives identical previews, rendered text included, for different chunkings", () => {
    const bytes = encoder.encode(payload.repeat(50));
    const opts = { contentType: "text/plain", headChars: 37, tailChars: 41 };
    const whole = build(opts, [bytes]);
    for (const size of [1, 3, 7, 64]) expect(build(opts, split(bytes, size))).toEqual(whole);
    expect(whole.omittedBytes).toBeGreaterThan(0n);
  });

  it("keeps a small payload whole in head, with no tail and nothing omitted", () => {
    const text = "\uFEFFhello\r\n  world  \r\n";
    const preview = build({ contentType: "text/plain" }, [encoder.encode(text)]);
    expect(preview.head).toBe(text);
    expect(preview.tail).toBe("");
    expect(preview.omittedBytes).toBe(0n);
    expect(preview.lineCount).toBe(3n);
  });

  it("treats head and tail that touch as the whole payload", () => {
    const text = "0123456789";
    const touching = build({ contentType: "text/plain", headChars: 6, tailChars: 4 }, [
      encoder.encode(text),
    ]);
    expect([touching.head, touching.tail, touching.omittedBytes]).toEqual([text, "", 0n]);
    const apart = build({ contentType: "text/plain", headChars: 5, tailChars: 4 }, [
      encoder.encode(text),
    ]);
    expect([apart.head, apart.tail, apart.omittedBytes]).toEqual(["01234", "6789", 1n]);
  });

  it("uses the defaults of 400 head and 200 tail characters", () => {
    const text = "é".repeat(1000);
    const preview = build({ contentType: "text/plain" }, split(encoder.encode(text), 999));
    expect(preview.head).toBe("é".repeat(400));
    expect(preview.tail).toBe("é".repeat(200));
    expect(preview.omittedBytes).toBe(800n);
  });

  it("previews an empty payload as empty text", () => {
    const preview = build({ contentType: "text/plain" }, []);
    expect([preview.head, preview.tail, preview.omittedBytes, preview.binary]).toEqual([
      "",
      "",
      0n,
      false,
    ]);
  });
});

describe("createPreviewBuilder — JSON", () => {
  const doc = {
    items: Array.from({ length: 30 }, (_, i) => ({ id: i, name: `item ${i}` })),
    total: 30,
  };

  it("previews pretty-printed JSON from its compact bytes", () => {
    const pretty = encoder.encode(JSON.stringify(doc, null, 2));
    const compact = JSON.stringify(doc);
    for (const size of [0, 1, 13]) {
      const preview = build(
        { contentType: "application/json", headChars: 20, tailChars: 10 },
        split(pretty, size),
      );
      expect(preview.head).toBe(compact.slice(0, 20));
      expect(preview.tail).toBe(compact.slice(-10));
      expect(preview.omittedBytes).toBe(BigInt(compact.length - 30));
      expect(preview.shape).toBe("{items: [30 items], total: number}");
    }
  });

  it("keeps a small compact document whole", () => {
    const preview = build({ contentType: "application/json" }, [
      encoder.encode('[\n  {"id": 1, "name": "a b"},\n  {"id": 2, "name": "c"}\n]\n'),
    ]);
    expect(preview.head).toBe('[{"id":1,"name":"a b"},{"id":2,"name":"c"}]');
    expect(preview.tail).toBe("");
    expect(preview.omittedBytes).toBe(0n);
    expect(preview.shape).toBe("[2 items of {id: number, name: string}]");
  });

  it("compacts without rewriting numbers, escapes, key order or string whitespace", () => {
    const source =
      '{\n  "big": 12345678901234567890,\n  "2": 1.50,\n  "s": "\\u0041  \\"x\\"\\t"\n}';
    const preview = build({ contentType: "application/json" }, [encoder.encode(source)]);
    expect(preview.head).toBe('{"big":12345678901234567890,"2":1.50,"s":"\\u0041  \\"x\\"\\t"}');
  });

  it("recognises +json media types and parameters", () => {
    for (const contentType of [
      "application/vnd.api+json",
      "Application/JSON; charset=utf-8",
      "application/problem+json ; q=1",
    ]) {
      const preview = build({ contentType }, [encoder.encode("[1, 2]")]);
      expect([preview.head, preview.shape]).toEqual(["[1,2]", "[2 items of number]"]);
    }
    const plain = build({ contentType: "text/plain" }, [encoder.encode("[1, 2]")]);
    expect([plain.head, plain.shape]).toEqual(["[1, 2]", ""]);
  });

  it("previews a top-level scalar with its shape", () => {
    const preview = build({ contentType: "application/json" }, [encoder.encode(' "hello" ')]);
    expect([preview.head, preview.shape]).toEqual(['"hello"', "string (5 chars)"]);
  });

  it("previews invalid JSON as text, byte for byte, with no shape", () => {
    const source = '{\n  "a": 1,\n  "b": [1, 2\n';
    const preview = build({ contentType: "application/json" }, split(encoder.encode(source), 4));
    expect([preview.head, preview.tail, preview.shape]).toEqual([source, "", ""]);
  });

  it("previews JSON over the buffering limit as text and drops the buffer", () => {
    const pretty = encoder.encode(JSON.stringify(doc, null, 2));
    const builder = createPreviewBuilder({
      contentType: "application/json",
      headChars: 10,
      tailChars: 5,
      jsonLimitBytes: 100,
    });
    for (const piece of split(pretty, 60)) builder.push(piece);
    // 16 bytes per wanted code point: room for the escape sequences a preview leaves out.
    expect(builder.retainedBytes()).toBe((10 + 5) * 16);
    const preview = builder.finish({
      binary: false,
      lineCount: 1,
      size: pretty.length,
      handle: "h",
      name: "n",
    });
    const text = new TextDecoder().decode(pretty);
    expect([preview.head, preview.tail, preview.shape]).toEqual([
      text.slice(0, 10),
      text.slice(-5),
      "",
    ]);
  });
});

describe("createPreviewBuilder — binary", () => {
  it("leaves head, tail and shape empty for binary payloads", () => {
    for (const bytes of [
      Uint8Array.from([0x68, 0x69, 0x00, 0x68]),
      Uint8Array.from([0x68, 0xff]),
      Uint8Array.from([0x68, 0xe2, 0x82]),
    ]) {
      for (const contentType of ["text/plain", "application/json"]) {
        const preview = build({ contentType }, split(bytes, 1));
        expect(preview.binary).toBe(true);
        expect([preview.head, preview.tail, preview.shape]).toEqual(["", "", ""]);
        expect(preview.omittedBytes).toBe(BigInt(bytes.length));
        expect(preview.text).toContain("· binary");
      }
    }
  });

  it("previews a multi-byte character split across chunks as text", () => {
    const preview = build({ contentType: "text/plain" }, split(encoder.encode("€😀"), 1));
    expect([preview.binary, preview.head]).toEqual([false, "€😀"]);
  });
});

describe("createPreviewBuilder — memory and lifecycle", () => {
  it("keeps only its fixed windows while 50 MiB of text stream through", () => {
    const builder = createPreviewBuilder({ contentType: "text/plain" });
    const bound = (400 + 200) * 16;
    const chunk = encoder.encode("line of text✓\n".repeat(4096)); // 16 bytes a line: 64 KiB
    const first = encoder.encode("FIRST\n");
    builder.push(first);
    let size = first.length;
    while (size < 50 * 1024 * 1024) {
      builder.push(chunk);
      size += chunk.length;
      expect(builder.retainedBytes()).toBeLessThanOrEqual(bound);
    }
    const last = encoder.encode("\nLAST");
    builder.push(last);
    size += last.length;
    const preview = builder.finish({ binary: false, lineCount: 1, size, handle: "h", name: "n" });
    expect(builder.retainedBytes()).toBeLessThanOrEqual(bound);
    expect(preview.head.startsWith("FIRST\nline of text✓\n")).toBe(true);
    expect(Array.from(preview.head)).toHaveLength(400);
    expect(preview.tail.endsWith("\nLAST")).toBe(true);
    expect(Array.from(preview.tail)).toHaveLength(200);
    expect(preview.omittedBytes).toBe(BigInt(size - bytesOf(preview.head) - bytesOf(preview.tail)));
  });

  it("buffers JSON only up to the limit", () => {
    const builder = createPreviewBuilder({
      contentType: "application/json",
      headChars: 0,
      tailChars: 0,
      jsonLimitBytes: 1024,
    });
    builder.push(new Uint8Array(1000).fill(0x20));
    expect(builder.retainedBytes()).toBe(1000);
    builder.push(new Uint8Array(100).fill(0x20));
    expect(builder.retainedBytes()).toBe(0);
  });

  it("renders its text with renderPreview", () => {
    const preview = build({ contentType: "text/plain", headChars: 2, tailChars: 2 }, [
      encoder.encode("hello world"),
    ]);
    expect(preview.text).toBe(
      renderPreview(preview, {
        handle: "res_call1",
        name: "tool",
        contentType: "text/plain",
        size: 11,
      }),
    );
  });

  it("refuses bad options and use after finish with precise codes", () => {
    const codeOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return ConnectError.from(err).code;
      }
      return undefined;
    };
    expect(codeOf(() => createPreviewBuilder({ contentType: "x", headChars: -1 }))).toBe(
      Code.InvalidArgument,
    );
    expect(codeOf(() => createPreviewBuilder({ contentType: "x", tailChars: 1.5 }))).toBe(
      Code.InvalidArgument,
    );
    const builder = createPreviewBuilder({ contentType: "text/plain" });
    builder.finish({ binary: false, lineCount: 0, size: 0, handle: "h", name: "n" });
    expect(codeOf(() => builder.push(new Uint8Array(1)))).toBe(Code.FailedPrecondition);
  });
});

describe("createPreviewBuilder — terminal escape sequences", () => {
  const red = (text: string) => `\u001b[31m${text}\u001b[0m`;
  const finish = (opts: PreviewBuilderOptions, text: string, chunk = 7) => {
    const bytes = encoder.encode(text);
    return build(opts, split(bytes, chunk));
  };

  it("leaves sequences out of head and tail and counts only visible characters", () => {
    const text = `${red("ERROR")} first\n${"x".repeat(500)}\nlast ${red("FAIL")}\n`;
    const preview = finish({ contentType: "text/plain", headChars: 11, tailChars: 10 }, text);
    expect(preview.head).toBe("ERROR first");
    expect(preview.tail).toBe("last FAIL\n");
    // The omitted bytes are stored bytes: everything between the cuts, sequences included.
    const headEnd = bytesOf(`${red("ERROR")} first`);
    const tailStart = bytesOf(text) - bytesOf(`last ${red("FAIL")}\n`);
    expect(preview.omittedBytes).toBe(BigInt(tailStart - headEnd));
    expect(preview.text).not.toContain("\u001b");
  });

  it("keeps them with keepAnsi, exactly as stored", () => {
    const text = `${red("ERROR")} first\n${"x".repeat(500)}\n`;
    const preview = finish(
      { contentType: "text/plain", headChars: 11, tailChars: 0, keepAnsi: true },
      text,
    );
    expect(preview.head).toBe(Array.from(text).slice(0, 11).join(""));
  });

  it("shows a short coloured output whole, without sequences", () => {
    const preview = finish({ contentType: "text/plain" }, `${red("ok")} done\n`);
    expect([preview.head, preview.tail, preview.omittedBytes]).toEqual(["ok done\n", "", 0n]);
  });

  it("leaves out an unterminated OSC at the end of a short output", () => {
    const text = `abc\u001b]8;;http://example.com/${"p".repeat(10)}`;
    const preview = finish({ contentType: "text/plain", headChars: 3, tailChars: 3 }, text);
    expect(preview.head).toBe("abc");
    expect(preview.tail).toBe("");
    expect(preview.omittedBytes).toBe(0n);
  });
});
