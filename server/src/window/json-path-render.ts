import { escapeControls } from "./render.js";

/** JsonPathHeader describes a JSONPath window for its first line. */
export interface JsonPathHeader {
  readonly handle: string;
  readonly query: string;
  /** Nodes skipped before the first one shown. */
  readonly skip: number;
  /** Nodes shown. */
  readonly count: number;
  /** Nodes the query matches in the whole payload, when it was scanned to the end. */
  readonly total: number | undefined;
}

/** NodeRow is what a rendered row needs to know about one matched node. */
export interface NodeRow {
  /** Normalized path. */
  readonly path: string;
  /** Compact JSON, already clipped. */
  readonly value: string;
  readonly clipped: boolean;
  readonly byteOffset: number;
  readonly byteLength: number;
}

/** renderJsonPathHeader renders the first line of a JSONPath window that has nodes. */
export function renderJsonPathHeader(h: JsonPathHeader): string {
  const total = h.total === undefined ? "" : ` of ${h.total}`;
  return `[${h.handle}] nodes ${h.skip + 1}-${h.skip + h.count} for JSONPath ${JSON.stringify(h.query)}${total}\n`;
}

/**
 * renderNodeRow renders one node: its normalized path, a tab, its compact JSON value and, for
 * a clipped value, where the whole value lies in bytes. Control characters are escaped, so
 * the row is one line and carries no terminal escape sequence.
 */
export function renderNodeRow(node: NodeRow, maxLineChars: number): string {
  const end = node.byteOffset + node.byteLength;
  const marker = node.clipped
    ? ` [… value clipped at ${maxLineChars} chars; it spans bytes ${node.byteOffset}-${end}: read bytes offset=${node.byteOffset}]`
    : "";
  return `${escapeControls(node.path)}\t${escapeControls(node.value)}${marker}\n`;
}

/** renderNoNodes renders the first line of a JSONPath window without nodes. */
export function renderNoNodes(h: JsonPathHeader): string {
  return h.skip > 0
    ? `[${h.handle}] no nodes after skip=${h.skip} for JSONPath ${JSON.stringify(h.query)} (${h.total ?? 0} in all)\n`
    : `[${h.handle}] no nodes for JSONPath ${JSON.stringify(h.query)}\n`;
}
