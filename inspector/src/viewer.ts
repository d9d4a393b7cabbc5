import type { Line, Match, SearchCursor } from "@spillway/proto/spillway/v1/spillway_pb.js";
import type { ResultAttachment } from "@spillway/proto/spillway/v1/types_pb.js";
import { readWindow, type SpillwayWebClient } from "./client.js";
import { byId, el } from "./dom.js";
import {
  formatBytes,
  hexRows,
  highlightSegments,
  isJsonType,
  prettyJson,
  type SearchSpec,
  visibleText,
} from "./format.js";
import type { StatusLine } from "./status.js";

/** Lines one page of the lines view asks for (the server may cap it lower). */
const pageLines = 100;
/** Bytes one page of the hex view asks for: 256 rows of 16. */
const pageBytes = 4096;
/** Matches one page of search results asks for. */
const pageMatches = 50;
/** Largest output the JSON view parses; a larger one is read in the lines view instead. */
const maxJsonBytes = 1024 * 1024;

type Mode = "lines" | "search" | "hex" | "json";

/** Viewer shows one output at a time, in bounded windows. */
export interface Viewer {
  /** Shows `attachment` of `runId`: JSON outputs in the JSON view, others from line 1. */
  open(runId: string, attachment: ResultAttachment): void;
  /** Forgets the output shown (another run was opened). */
  clear(): void;
}

/**
 * createViewer binds the viewer pane of the page. Each view reads one window per action
 * (a page of lines, a page of matches, 4 KiB of bytes, or a JSON output up to 1 MiB), so an
 * output of any size is browsed without loading it whole; every byte is rendered as text.
 */
export function createViewer(client: SpillwayWebClient, status: StatusLine): Viewer {
  const view = byId<HTMLDivElement>("view");
  const position = byId<HTMLParagraphElement>("position");
  const name = byId<HTMLParagraphElement>("viewer-name");
  const modes = byId<HTMLElement>("modes");
  const panels: Record<Mode, HTMLElement> = {
    lines: byId("lines-tools"),
    search: byId("search-form"),
    hex: byId("hex-tools"),
    json: byId("lines-tools"),
  };
  const searchMore = byId<HTMLButtonElement>("search-more");

  let runId = "";
  let output: ResultAttachment | undefined;
  /** Bumped by every action: a window that arrives after a newer action began is dropped. */
  let generation = 0;
  let lineStart = 0n;
  let lineNext: bigint | undefined;
  let totalLines = 0n;
  let byteStart = 0n;
  /** Where the bytes shown end: the server may return fewer than asked (--max-bytes-window). */
  let byteEnd = 0n;
  /** Bytes a full window holds: a page, or the server's cap once a window shows it lower. */
  let byteStep = BigInt(pageBytes);
  let totalBytes = 0n;
  let search:
    | { spec: SearchSpec; context: number; shown: number; cursor?: SearchCursor }
    | undefined;
  let searchNext: bigint | undefined;

  const handleOf = () => output?.handle ?? "";

  function setMode(mode: Mode): void {
    for (const button of modes.querySelectorAll<HTMLButtonElement>("button[data-mode]")) {
      button.setAttribute("aria-pressed", String(button.dataset.mode === mode));
    }
    for (const panel of new Set(Object.values(panels))) panel.hidden = true;
    if (mode !== "json") panels[mode].hidden = false;
  }

  /** Runs one read, reporting its failure on the status line; stale results are dropped. */
  async function act(work: (isCurrent: () => boolean) => Promise<void>): Promise<void> {
    const mine = ++generation;
    const isCurrent = () => mine === generation;
    status.busy("reading…");
    try {
      await work(isCurrent);
      if (isCurrent()) status.clear();
    } catch (err) {
      if (isCurrent()) status.error(err);
    }
  }

  function lineRow(line: Line, className = "", text: (Node | string)[] = [line.text]): HTMLElement {
    return el("tr", { className, attrs: { "data-line": line.number.toString() } }, [
      el("td", { className: "n", text: line.number.toString() }),
      el("td", { className: "t" }, [
        ...text,
        ...(line.clipped ? [el("span", { className: "clipped", text: " …(clipped)" })] : []),
      ]),
    ]);
  }

  async function showLines(
    window: { offset: bigint; fromEnd?: boolean },
    target?: bigint,
  ): Promise<void> {
    setMode("lines");
    await act(async (isCurrent) => {
      const w = await readWindow(client, {
        runId,
        handle: handleOf(),
        window: { case: "lines", value: { ...window, limit: pageLines } },
      });
      if (!isCurrent()) return;
      if (w.header?.binary === true) {
        await showHex(0n);
        return;
      }
      totalLines = w.header?.totalLines ?? 0n;
      lineStart = w.header?.start ?? 0n;
      lineNext = w.trailer?.nextOffset;
      const body = el(
        "tbody",
        {},
        w.lines.map((line) => lineRow(line, line.number === target ? "target" : "")),
      );
      view.replaceChildren(el("table", { className: "lines" }, [body]));
      const first = w.lines[0]?.number;
      const last = w.lines.at(-1)?.number;
      position.textContent =
        first === undefined
          ? `no lines (${totalLines} in all)`
          : `lines ${first}–${last} of ${totalLines}`;
      const targetRow = view.querySelector("tr.target");
      if (targetRow !== null) targetRow.scrollIntoView({ block: "center" });
      else view.scrollTop = window.fromEnd === true ? view.scrollHeight : 0;
    });
  }

  async function showHex(offset: bigint): Promise<void> {
    setMode("hex");
    await act(async (isCurrent) => {
      const w = await readWindow(client, {
        runId,
        handle: handleOf(),
        window: { case: "bytes", value: { offset, limit: BigInt(pageBytes) } },
      });
      if (!isCurrent()) return;
      totalBytes = w.header?.totalBytes ?? 0n;
      byteStart = offset;
      byteEnd = offset + BigInt(w.data.length);
      // A window short of a page before the end was cut by the server's cap.
      if (byteEnd < totalBytes && w.data.length > 0) byteStep = BigInt(w.data.length);
      const rows = hexRows(w.data, offset).map((row) =>
        el("tr", {}, [
          el("td", { className: "n", text: row.offset }),
          el("td", { className: "hex", text: row.hex }),
          el("td", { className: "ascii", text: row.ascii }),
        ]),
      );
      view.replaceChildren(el("table", { className: "hexdump" }, [el("tbody", {}, rows)]));
      view.scrollTop = 0;
      const end = offset + BigInt(w.data.length);
      position.textContent = `${w.header?.binary === true ? "binary; " : ""}bytes ${offset}–${end} of ${totalBytes} (${formatBytes(totalBytes)})`;
    });
  }

  async function showJson(): Promise<void> {
    setMode("json");
    const size = output?.sizeBytes ?? 0n;
    if (size === 0n || size > BigInt(maxJsonBytes)) {
      // No read: drop any window still in flight for what was shown before.
      generation++;
      status.clear();
      view.replaceChildren();
      position.textContent =
        size === 0n
          ? "empty output (0 B): no JSON to show"
          : `${formatBytes(size)} is more than the JSON view parses (${formatBytes(maxJsonBytes)}); read it in Lines or Search`;
      return;
    }
    await act(async (isCurrent) => {
      const w = await readWindow(client, {
        runId,
        handle: handleOf(),
        window: { case: "bytes", value: { offset: 0n, limit: size } },
      });
      if (!isCurrent()) return;
      if (BigInt(w.data.length) < size) {
        view.replaceChildren();
        position.textContent = `${formatBytes(size)} is more than one bytes window of this server (${formatBytes(w.data.length)}, its --max-bytes-window); read it in Lines or Search`;
        return;
      }
      let pretty: string;
      try {
        pretty = prettyJson(new TextDecoder("utf-8", { fatal: true }).decode(w.data));
      } catch (err) {
        view.replaceChildren();
        position.textContent = `not JSON: ${err instanceof Error ? err.message : String(err)}`;
        return;
      }
      const lines = pretty.split("\n");
      const rows = lines.map((text, i) =>
        el("tr", {}, [el("td", { className: "n", text: String(i + 1) }), el("td", { text })]),
      );
      view.replaceChildren(el("table", { className: "json" }, [el("tbody", {}, rows)]));
      view.scrollTop = 0;
      position.textContent = `JSON, pretty-printed: ${lines.length} lines from ${formatBytes(size)}`;
    });
  }

  function matchRows(match: Match, spec: SearchSpec): HTMLElement[] {
    const rows = match.before.map((line) => lineRow(line, "context"));
    if (match.line !== undefined) {
      const segments = highlightSegments(match.line.text, spec).map((s) =>
        s.match ? el("mark", { text: s.text }) : s.text,
      );
      rows.push(lineRow(match.line, "match", segments));
    }
    rows.push(...match.after.map((line) => lineRow(line, "context")));
    return rows;
  }

  async function showSearch(more: boolean): Promise<void> {
    setMode("search");
    const current = search;
    if (current === undefined || current.spec.pattern === "") return;
    const skip = more ? (searchNext ?? 0n) : 0n;
    await act(async (isCurrent) => {
      const w = await readWindow(client, {
        runId,
        handle: handleOf(),
        window: {
          case: "search",
          value: {
            ...current.spec,
            maxMatches: pageMatches,
            contextLines: current.context,
            skip,
            ...(more && current.cursor !== undefined ? { after: current.cursor } : {}),
          },
        },
      });
      if (!isCurrent()) return;
      searchNext = w.trailer?.nextOffset;
      current.cursor = w.trailer?.searchCursor;
      let body = view.querySelector<HTMLTableSectionElement>("table.search tbody");
      if (!more || body === null) {
        body = el("tbody");
        view.replaceChildren(el("table", { className: "search" }, [body]));
        current.shown = 0;
      }
      for (const match of w.matches) {
        if (body.childElementCount > 0)
          body.append(
            el("tr", { className: "gap" }, [el("td", { text: "⋯" }), el("td", { text: "" })]),
          );
        body.append(...matchRows(match, current.spec));
      }
      current.shown += w.matches.length;
      searchMore.hidden = searchNext === undefined;
      const total = w.trailer?.totalMatches;
      position.textContent =
        current.shown === 0
          ? `no line matches ${JSON.stringify(current.spec.pattern)}`
          : `${current.shown} of ${total === undefined ? "more" : total} matching lines`;
    });
  }

  for (const button of modes.querySelectorAll<HTMLButtonElement>("button[data-mode]")) {
    button.addEventListener("click", () => {
      const mode = button.dataset.mode as Mode;
      if (mode === "lines") void showLines({ offset: lineStart });
      else if (mode === "hex") void showHex(byteStart);
      else if (mode === "json") void showJson();
      else {
        setMode("search");
        view.replaceChildren();
        position.textContent = "";
        byId<HTMLInputElement>("pattern").focus();
      }
    });
  }
  byId("first").addEventListener("click", () => void showLines({ offset: 0n }));
  byId("prev").addEventListener("click", () => {
    // The window that ends just before the first line shown, counted from the end: the server
    // may hold fewer than a page of long lines, and then keeps the ones nearest that end.
    if (lineStart > 0n) void showLines({ offset: totalLines - lineStart, fromEnd: true });
  });
  byId("next").addEventListener("click", () => {
    if (lineNext !== undefined) void showLines({ offset: lineNext });
  });
  byId("tail").addEventListener("click", () => void showLines({ offset: 0n, fromEnd: true }));
  byId<HTMLFormElement>("jump-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const raw = byId<HTMLInputElement>("jump").value.trim();
    if (!/^[0-9]+$/.test(raw) || BigInt(raw) < 1n) {
      status.message("a line number is a whole number from 1");
      return;
    }
    const line = BigInt(raw);
    if (totalLines > 0n && line > totalLines) {
      status.message(`the output has ${totalLines} lines`);
      return;
    }
    void showLines({ offset: line - 1n }, line);
  });
  byId<HTMLFormElement>("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const context = Number(byId<HTMLInputElement>("context").value || "0");
    search = {
      spec: {
        pattern: byId<HTMLInputElement>("pattern").value,
        regex: byId<HTMLInputElement>("regex").checked,
        ignoreCase: byId<HTMLInputElement>("ignore-case").checked,
      },
      context: Number.isInteger(context) && context >= 0 ? Math.min(context, 20) : 0,
      shown: 0,
    };
    void showSearch(false);
  });
  searchMore.addEventListener("click", () => void showSearch(true));
  view.addEventListener("click", (event) => {
    // A line number in search results opens the lines view at that line.
    const cell = (event.target as Element).closest("table.search td.n");
    const line = cell?.parentElement?.dataset.line;
    if (line !== undefined) void showLines({ offset: BigInt(line) - 1n }, BigInt(line));
  });
  byId("hex-prev").addEventListener("click", () => {
    void showHex(byteStart > byteStep ? byteStart - byteStep : 0n);
  });
  byId("hex-next").addEventListener("click", () => {
    if (byteEnd < totalBytes) void showHex(byteEnd);
  });

  return {
    open(run, attachment) {
      runId = run;
      output = attachment;
      lineStart = 0n;
      byteStart = 0n;
      byteEnd = 0n;
      byteStep = BigInt(pageBytes);
      totalLines = attachment.lineCount;
      search = undefined;
      searchMore.hidden = true;
      name.textContent = [
        attachment.name || attachment.handle,
        attachment.handle,
        attachment.contentType || "no type",
      ]
        .map(visibleText)
        .concat(formatBytes(attachment.sizeBytes))
        .join(" · ");
      modes.hidden = false;
      // Nothing of the output shown before stays on screen, should this one fail to load.
      view.replaceChildren();
      position.textContent = "";
      if (isJsonType(attachment.contentType)) void showJson();
      else void showLines({ offset: 0n });
    },
    clear() {
      generation++;
      output = undefined;
      modes.hidden = true;
      for (const panel of new Set(Object.values(panels))) panel.hidden = true;
      name.textContent = "Pick an output.";
      position.textContent = "";
      view.replaceChildren();
    },
  };
}
