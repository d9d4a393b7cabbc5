import { open } from "node:fs/promises";

/** LogFile describes a generated log: where it is and what a search must find in it. */
export interface LogFile {
  readonly path: string;
  readonly bytes: number;
  readonly lines: number;
  /** A literal that occurs on `rareLines` lines only. */
  readonly rareLiteral: string;
  /** An RE2-class expression (also valid for `grep -E`) matching exactly the rare lines. */
  readonly rareRegex: string;
  /** How many lines the rare literal and regex match. */
  readonly rareLines: number;
  /**
   * An expression matching exactly the rare lines too, though the only plain text it names is
   * on nearly every line; unset for a log that has none.
   */
  readonly commonTextRegex?: string;
}

/** One rare line every this many lines: about 48 in a 1 GiB log. */
const rareEvery = 250_000;
const services = ["api", "auth", "billing", "search", "worker"];
const paths = ["/api/v1/items", "/api/v1/users/me", "/healthz", "/api/v1/orders/search"];

/**
 * writeLogFile writes a log of at least `bytes` bytes (whole lines, ~90 bytes each, so a
 * GiB is ~12 M lines) to `path`, with a rare ERROR line every 250,000 lines for searches.
 * Deterministic: the same size always gives the same bytes.
 */
export async function writeLogFile(path: string, bytes: number): Promise<LogFile> {
  let rare = 0;
  const written = await writeLines(path, bytes, (line) => {
    const ms = line % 1000;
    const second = Math.floor(line / 1000) % 86_400;
    const clock = `${String(Math.floor(second / 3600)).padStart(2, "0")}:${String(Math.floor(second / 60) % 60).padStart(2, "0")}:${String(second % 60).padStart(2, "0")}.${String(ms).padStart(3, "0")}`;
    if (line % rareEvery === rareEvery - 1) {
      rare++;
      return `2026-11-30T${clock}Z ERROR svc=billing quota exceeded tenant=t${line % 97} line=${line}\n`;
    }
    return `2026-11-30T${clock}Z INFO  svc=${services[line % 5]} req=${line} path=${paths[line % 4]} status=200 ms=${line % 89}\n`;
  });
  return {
    path,
    ...written,
    rareLiteral: "quota exceeded",
    rareRegex: "ERROR svc=[a-z]+ quota (exceeded|exhausted) tenant=t[0-9]+",
    rareLines: rare,
  };
}

/**
 * writeLines writes `lineAt(0)`, `lineAt(1)`, … (single-byte text, each ending with `\n`) to
 * `path` through an 8 MiB buffer until at least `bytes` are written, and returns how many bytes
 * and lines it wrote. lineAt is called once per line, in order.
 */
export async function writeLines(
  path: string,
  bytes: number,
  lineAt: (line: number) => string,
): Promise<{ bytes: number; lines: number }> {
  const file = await open(path, "w");
  const block = Buffer.allocUnsafe(8 * 1024 * 1024);
  let used = 0;
  let written = 0;
  let line = 0;
  try {
    while (written + used < bytes) {
      const text = lineAt(line);
      if (used + text.length > block.length) {
        await file.write(block, 0, used);
        written += used;
        used = 0;
      }
      used += block.write(text, used, "latin1");
      line++;
    }
    await file.write(block, 0, used);
    written += used;
  } finally {
    await file.close();
  }
  return { bytes: written, lines: line };
}
