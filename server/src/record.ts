import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  JsonKind,
  type Preview,
  PreviewSchema,
  type ResultAttachment,
  ResultAttachmentSchema,
  Storage,
} from "@spillway/proto/spillway/v1/types_pb.js";

/** StoredPreview is the preview as kept in a record. */
export interface StoredPreview {
  readonly head: string;
  readonly tail: string;
  readonly shape: string;
  readonly omittedBytes: number;
  readonly text: string;
}

/** StoredBlob locates a record's payload and its line index in the backend. */
export interface StoredBlob {
  /** Backend key of the payload. */
  readonly key: string;
  /** Backend key of the serialized line index; absent when the payload has one index entry. */
  readonly indexKey?: string;
  /** Lines between two index entries. */
  readonly stride: number;
  /** Backend key of the serialized JSON view index; absent when the view has one checkpoint. */
  readonly jsonIndexKey?: string;
  /** The run whose storage prefix holds the blob (differs from the record's run after a fork). */
  readonly ownerRunId: string;
}

/**
 * StoredJson is what offload found about a payload's JSON view. A record without it was
 * offloaded before JSON views were indexed.
 */
export interface StoredJson {
  /** `none`: neither a JSON document nor JSON Lines. */
  readonly kind: "document" | "lines" | "none";
  /** Lines of the view (0 for none). */
  readonly viewLines: number;
  /** View lines between two checkpoints. */
  readonly stride: number;
  /** Checkpoints in the index (blob.jsonIndexKey holds them when there are several). */
  readonly checkpoints: number;
  /** For `none`: why, as the tokenizer or the JSON Lines rule said it. */
  readonly reason?: string;
}

/**
 * StoredRecord is a committed offload as kept in a run's registry: everything ResultAttachment
 * shows plus where the bytes are. Records are immutable once written.
 */
export interface StoredRecord {
  readonly v: 1;
  readonly handle: string;
  readonly tenant: string;
  /** The run the output was offloaded to. */
  readonly runId: string;
  readonly callId: string;
  readonly slot?: string;
  /** The call's attempt, 2 and up; absent for the first attempt (records before attempts too). */
  readonly attempt?: number;
  readonly name: string;
  readonly contentType: string;
  readonly sizeBytes: number;
  readonly observedBytes: number;
  readonly truncated: boolean;
  readonly stored: "inline" | "blob" | "preview_only";
  readonly sha256: string;
  readonly binary: boolean;
  readonly lineCount: number;
  readonly preview: StoredPreview;
  readonly createdMs: number;
  readonly expiresMs?: number;
  readonly blob?: StoredBlob;
  /** The payload's JSON view. */
  readonly json?: StoredJson;
  /** Base64 payload of an inline record. */
  readonly inline?: string;
  /**
   * Set on a record MergeRun wrote into run `into`: it is visible only once that merge's
   * outcome says committed (mergeOutcomeKey). A fork's copy drops it.
   */
  readonly merge?: StoredMerge;
}

/** StoredMerge names the merge that wrote a record, the run it merged into, and when. */
export interface StoredMerge {
  readonly id: string;
  readonly into: string;
  /** When the merge started (its intent), the same for all of its records. */
  readonly ms?: number;
}

declare const base64Brand: unique symbol;

/**
 * Base64 is base64 text this process made from bytes (toBase64): only `A-Z a-z 0-9 + / =`,
 * which JSON never escapes. Text read back from a store is a plain string, whatever it holds.
 */
export type Base64 = string & { readonly [base64Brand]: true };

/** toBase64 encodes bytes as Base64. */
export function toBase64(bytes: Uint8Array): Base64 {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64") as Base64;
}

/**
 * NewRecord is a record about to be committed: its inline payload, if any, is Base64 made here,
 * so a record read back from a store goes through recommit first.
 */
export interface NewRecord extends Omit<StoredRecord, "inline"> {
  readonly inline?: Base64;
}

/**
 * recommit turns a stored record into one to commit again (a fork's copy): its inline text is
 * decoded and encoded afresh, so what a store handed back cannot reach the record's JSON
 * unescaped; the bytes it stands for are the ones a reader decodes from it. A merge mark is
 * dropped: the copy belongs to the run it is committed in, not to the merge that wrote it.
 */
export function recommit(record: StoredRecord): NewRecord {
  const { inline, merge: _merge, ...rest } = record;
  return inline === undefined ? rest : { ...rest, inline: toBase64(Buffer.from(inline, "base64")) };
}

/**
 * encodeRecord serializes a record for the backend as one JSON object (what decodeRecord reads).
 * An inline payload's Base64 goes in last, copied as it is: JSON.stringify would escape it
 * character by character, the largest share of the JavaScript a small offload costs the
 * server, and Base64 needs no escaping.
 */
export function encodeRecord(record: NewRecord): Uint8Array {
  const inline = record.inline;
  if (inline === undefined) return Buffer.from(JSON.stringify(record), "utf8");
  const { inline: _, ...rest } = record;
  const head = JSON.stringify(rest);
  // The head without its closing brace, then the inline field, written as one-byte text.
  const headBytes = Buffer.byteLength(head, "utf8") - 1;
  const field = ',"inline":"';
  const out = Buffer.allocUnsafe(headBytes + field.length + inline.length + 2);
  let at = out.write(head, 0, headBytes, "utf8");
  at += out.write(field, at, "latin1");
  at += out.write(inline, at, "latin1");
  out.write('"}', at, "latin1");
  return out;
}

/**
 * decodeRecord parses a stored record; anything that is not a version-1 record is reported
 * as DATA_LOSS rather than trusted.
 */
export function decodeRecord(bytes: Uint8Array): StoredRecord {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch {
    throw new ConnectError("stored record is corrupt", Code.DataLoss);
  }
  if (
    typeof value !== "object" ||
    value === null ||
    (value as { v?: unknown }).v !== 1 ||
    typeof (value as { handle?: unknown }).handle !== "string"
  ) {
    throw new ConnectError("stored record has an unknown format", Code.DataLoss);
  }
  return value as StoredRecord;
}

/** The fields that tell one commit of a record from another under the same key. */
type CommitIdentity = Pick<StoredRecord, "createdMs" | "expiresMs" | "sha256" | "blob">;

/**
 * isSameCommit reports whether two reads of one key found the same commit: a record committed
 * in its place later has its own time and blob. A fork's copy is the same commit as the record
 * it copies (recommit keeps both).
 */
export function isSameCommit(a: CommitIdentity, b: CommitIdentity): boolean {
  return (
    a.createdMs === b.createdMs &&
    a.expiresMs === b.expiresMs &&
    a.sha256 === b.sha256 &&
    a.blob?.key === b.blob?.key
  );
}

/** isExpired reports whether a record is past its own expiry at nowMs. */
export function isExpired(record: StoredRecord, nowMs: number): boolean {
  return record.expiresMs !== undefined && record.expiresMs <= nowMs;
}

const storageOf = {
  inline: Storage.INLINE,
  blob: Storage.BLOB,
  preview_only: Storage.PREVIEW_ONLY,
} as const;

/** toAttachment renders a record as the API's ResultAttachment. */
export function toAttachment(record: StoredRecord, runExpiresMs?: number): ResultAttachment {
  const expires = minDefined(record.expiresMs, runExpiresMs);
  return create(ResultAttachmentSchema, {
    name: record.name,
    handle: record.handle,
    contentType: record.contentType,
    sizeBytes: BigInt(record.sizeBytes),
    observedBytes: BigInt(record.observedBytes),
    truncated: record.truncated,
    stored: storageOf[record.stored],
    sha256: record.sha256,
    readable: record.stored !== "preview_only",
    preview: toPreview(record),
    lineCount: BigInt(record.lineCount),
    createTime: timestampFromMs(record.createdMs),
    ...(expires === undefined ? {} : { expireTime: timestampFromMs(expires) }),
    key: {
      tenant: record.tenant,
      runId: record.runId,
      callId: record.callId,
      ...(record.attempt === undefined ? {} : { attempt: record.attempt }),
    },
    slot: record.slot ?? "",
    binary: record.binary,
    attempt: record.attempt ?? 1,
    jsonKind: jsonKindOf[record.json?.kind ?? "none"],
    jsonViewLines: BigInt(record.json?.viewLines ?? 0),
  });
}

const jsonKindOf = {
  document: JsonKind.DOCUMENT,
  lines: JsonKind.LINES,
  none: JsonKind.UNSPECIFIED,
} as const;

function toPreview(record: StoredRecord): Preview {
  return create(PreviewSchema, {
    head: record.preview.head,
    tail: record.preview.tail,
    shape: record.preview.shape,
    lineCount: BigInt(record.lineCount),
    omittedBytes: BigInt(record.preview.omittedBytes),
    binary: record.binary,
    text: record.preview.text,
  });
}

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}
