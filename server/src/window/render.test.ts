import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ReadToolOutputRequestSchema } from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it } from "vitest";
import { countChars, createWindowCaps } from "./caps.js";
import { readWindow } from "./read-window.js";
import {
  lineRowChars,
  renderBinary,
  renderHexLine,
  renderLineRow,
  renderLinesFooter,
  renderSearchHeader,
} from "./render.js";
import { createBufferWindowSource } from "./source.js";

/** A window as a request literal spells it. */
type WindowInit = MessageInitShape<typeof ReadToolOutputRequestSchema>["window"];

const fixture = "first line\r\nsecond: ok\nthird 😀 is long enough to clip\nfourth\n";
const caps = createWindowCaps({ maxLineChars: 10, maxWindowChars: 5000 });

/** Renders one window of the fixture. */
async function render(window: WindowInit): Promise<string> {
  const source = createBufferWindowSource("res_fix", "text/plain", Buffer.from(fixture), false);
  const request = create(ReadToolOutputRequestSchema, { runId: "r", handle: "res_fix", window });
  let rendered = "";
  for await (const frame of readWindow(source, request, caps)) {
    if (frame.frame.case === "trailer") rendered = frame.frame.value.rendered;
  }
  return rendered;
}

describe("rendered windows", () => {
  it("renders a lines window exactly", async () => {
    expect(await render({ case: "lines", value: { offset: 1n, limit: 2 } })).toBe(
      "[res_fix] lines 2-3 of 4 (64 bytes)\n" +
        "     2\tsecond: ok\n" +
        "     3\tthird 😀 is [… line clipped at 10 chars; it continues at byte 36: read bytes offset=36]\n" +
        "[more: offset=3]\n",
    );
  });

  it("renders a tail, a search and a bytes window exactly", async () => {
    expect(await render({ case: "lines", value: { offset: 0n, limit: 1, fromEnd: true } })).toBe(
      "[res_fix] lines 4-4 of 4 (64 bytes)\n     4\tfourth\n[earlier lines: offset=1 from_end=true]\n",
    );
    expect(
      await render({
        case: "search",
        value: { pattern: "OK", ignoreCase: true, skip: 0n, contextLines: 1 },
      }),
    ).toBe(
      '[res_fix] matches 1-1 for "OK" (literal, ignore case) of 1\n' +
        "     1-\tfirst line\n     2:\tsecond: ok\n     3-\tthird 😀 is [… line clipped at 10 chars; it continues at byte 36: read bytes offset=36]\n" +
        "[no more matches]\n",
    );
    expect(await render({ case: "bytes", value: { offset: 0n, limit: 12n } })).toBe(
      "[res_fix] bytes 0-12 of 64\nfirst line\r\n\n[more: bytes offset=12]\n",
    );
  });

  it("renders the same window to the same bytes every time", async () => {
    const windows: WindowInit[] = [
      { case: undefined },
      { case: "lines", value: { offset: 2n, limit: 5, fromEnd: true } },
      { case: "bytes", value: { offset: 3n } },
      { case: "search", value: { pattern: "i.", regex: true, skip: 1n, contextLines: 2 } },
    ];
    for (const window of windows) {
      const once = Buffer.from(await render(window));
      const twice = Buffer.from(await render(window));
      expect(once.length).toBeGreaterThan(0);
      expect(once.equals(twice)).toBe(true);
    }
  });
});

describe("render helpers", () => {
  it("right-aligns line numbers in 6 columns with plain digits", () => {
    const row = { number: 1234567, text: "x", clipped: false, continuesAt: 0 };
    expect(renderLineRow(row, 10)).toBe("1234567\tx\n");
    expect(renderLineRow({ ...row, number: 42 }, 10, ":")).toBe("    42:\tx\n");
  });

  it("renders footers and headers without locale formatting", () => {
    expect(
      renderLinesFooter({ kind: "clipped", next: 12345, fromEnd: false, maxWindowChars: 50000 }),
    ).toBe("[window clipped at 50000 chars; more: offset=12345]\n");
    expect(
      renderSearchHeader({
        handle: "h",
        pattern: "a\tb",
        regex: true,
        ignoreCase: false,
        skip: 1000,
        count: 2,
        total: undefined,
      }),
    ).toBe('[h] matches 1001-1002 for "a\\tb" (regex)\n');
    expect(renderBinary("h", 3, "")).toBe(
      "[h] binary output (3 bytes, application/octet-stream); read it with bytes=true\n",
    );
  });

  it("pads a short hex line so the ASCII column lines up", () => {
    expect(renderHexLine(16, Buffer.from("Hello\n"))).toBe(
      "00000010: 4865 6c6c 6f0a                           Hello.",
    );
  });
});

describe("lineRowChars", () => {
  it("counts a row's code points as countChars does, from its line's text alone", () => {
    for (const text of [
      "",
      "plain",
      "😀 pair",
      "é\u00e9",
      "lone \uD800",
      "\uDC00 lone",
      "end 😀",
    ]) {
      for (const clipped of [false, true]) {
        const line = { number: 1_234_567, text, clipped, continuesAt: 99 };
        for (const tag of ["", ":", "-"] as const) {
          const row = renderLineRow(line, 10, tag);
          expect(lineRowChars(row, line)).toBe(countChars(row));
        }
      }
    }
  });
});
