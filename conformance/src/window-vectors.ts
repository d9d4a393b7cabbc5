import { readFile } from "node:fs/promises";
import type { ConformanceCase, ReadSpec } from "./case.js";
import type { PayloadSpec } from "./payload.js";

/** VectorCaps are the window caps the expected texts were rendered with. */
export interface VectorCaps {
  readonly maxWindowLines: number;
  readonly maxWindowChars: number;
  readonly maxLineChars: number;
  readonly maxMatches: number;
}

/**
 * WindowVector is one cross-language parity vector: a payload offloaded under `call` (and
 * `slot`), one window read from it, and the exact text the server renders for it.
 */
export interface WindowVector {
  readonly name: string;
  readonly call: string;
  readonly slot?: string;
  readonly contentType?: string;
  readonly payload: PayloadSpec;
  readonly window: Pick<ReadSpec, "lines" | "bytes" | "search" | "json" | "jsonPath">;
  /** The request's keep_ansi (unset: false, escape sequences removed). */
  readonly keepAnsi?: boolean;
  /** Features the server must have beyond the caps (`ansi_strip` for escape sequences). */
  readonly features?: readonly string[];
  readonly rendered: string;
}

/**
 * PreviewVector is a parity vector for the preview computed at offload: a payload offloaded
 * under `call` with `preview` options, and the exact `preview.text` of the committed record.
 */
export interface PreviewVector {
  readonly name: string;
  readonly call: string;
  readonly contentType?: string;
  readonly payload: PayloadSpec;
  readonly preview?: {
    readonly headChars?: number;
    readonly tailChars?: number;
    readonly keepAnsi?: boolean;
  };
  readonly features?: readonly string[];
  /** The preview's head, tail and text, exactly. */
  readonly head: string;
  readonly tail: string;
  readonly text: string;
}

/** WindowVectorFile is the shape of conformance/window-vectors.json. */
export interface WindowVectorFile {
  readonly description?: string;
  readonly caps: VectorCaps;
  readonly vectors: readonly WindowVector[];
  /** Preview parity vectors (not caps-dependent). */
  readonly previewVectors?: readonly PreviewVector[];
}

/** defaultCapsFeature is the feature a target has when its window caps equal the vectors' caps. */
export const defaultCapsFeature = "default-caps";

/** loadWindowVectors reads a window-vectors JSON file. */
export async function loadWindowVectors(file: string): Promise<WindowVectorFile> {
  return JSON.parse(await readFile(file, "utf8")) as WindowVectorFile;
}

/**
 * vectorHandle is the handle a vector's payload is offloaded under: `res_<call>`, or
 * `out_<call>_<slot>` with `%` and `_` of the slot written `%25` and `%5F` (the contract's rule).
 */
export function vectorHandle(v: WindowVector): string {
  if (v.slot === undefined) return `res_${v.call}`;
  return `out_${v.call}_${v.slot.replace(/[%_]/g, (c) => (c === "%" ? "%25" : "%5F"))}`;
}

/**
 * vectorCases turns each vector into a case named `vectors/<name>`: offload the payload, read
 * the window, expect the exact rendered text. The cases need the `default-caps` feature (and
 * `regex` for regex searches, `jsonpath` for JSONPath windows, and the vector's own `features`),
 * since the texts depend on the caps. Each preview vector becomes a case named
 * `preview-vectors/<name>`: offload the payload with the vector's preview options, expect the
 * exact preview head, tail and text.
 */
export function vectorCases(file: WindowVectorFile): ConformanceCase[] {
  const previews = (file.previewVectors ?? []).map(
    (v): ConformanceCase => ({
      name: `preview-vectors/${v.name}`,
      features: [...(v.features ?? [])],
      steps: [
        {
          offload: {
            run: "v",
            call: v.call,
            ...(v.contentType === undefined ? {} : { contentType: v.contentType }),
            ...(v.preview === undefined ? {} : { preview: v.preview }),
            data: v.payload,
          },
          expect: { attachment: { preview: { head: v.head, tail: v.tail, text: v.text } } },
        },
      ],
    }),
  );
  return [...file.vectors.map(windowCase), ...previews];
}

/** The case of one window vector. */
function windowCase(v: WindowVector): ConformanceCase {
  return {
    name: `vectors/${v.name}`,
    features: [
      defaultCapsFeature,
      ...(v.window.search?.regex ? ["regex"] : []),
      ...(v.window.jsonPath === undefined ? [] : ["jsonpath"]),
      ...(v.window.json === undefined ? [] : ["json_view"]),
      ...(v.features ?? []),
    ],
    steps: [
      {
        offload: {
          run: "v",
          call: v.call,
          ...(v.slot === undefined ? {} : { slot: v.slot }),
          ...(v.contentType === undefined ? {} : { contentType: v.contentType }),
          data: v.payload,
        },
      },
      {
        read: {
          run: "v",
          handle: vectorHandle(v),
          ...v.window,
          ...(v.keepAnsi === undefined ? {} : { keepAnsi: v.keepAnsi }),
        },
        expect: { rendered: v.rendered },
      },
    ],
  };
}
