import { decodeRecord, type StoredRecord } from "./record.js";

/** RecordMemo decodes stored records, parsing each distinct record's bytes once. */
export interface RecordMemo {
  /**
   * Returns decodeRecord(bytes): the record decoded before under `key` when these are the bytes
   * it was decoded from, byte for byte, else the bytes decoded now (and remembered). What it
   * returns is deep-frozen, since later reads share it.
   */
  decode(key: string, bytes: Uint8Array): StoredRecord;
}

/** The bounds of a RecordMemo. */
export interface RecordMemoLimits {
  /** Records remembered at most; the least recently read goes first. */
  readonly maxRecords: number;
  /** Largest record remembered: larger ones (inline payloads) are decoded every time. */
  readonly maxRecordBytes: number;
}

/**
 * A thousand records of at most 16 KiB: a few MiB at worst, typically ~2 KB each (a record with
 * its preview) and far fewer in use at once.
 */
export const defaultRecordMemoLimits: RecordMemoLimits = {
  maxRecords: 1024,
  maxRecordBytes: 16 * 1024,
};

/**
 * createRecordMemo returns a RecordMemo within `limits`. A record is read from the store on
 * every lookup all the same (a deleted or replaced record must not be served from memory);
 * only its parse is saved: JSON.parse of a ~2 KB record with its preview was ~9 % of the
 * server's time on a model-tool window, against one comparison of the bytes.
 */
export function createRecordMemo(limits: RecordMemoLimits = defaultRecordMemoLimits): RecordMemo {
  const seen = new Map<string, { readonly bytes: Buffer; readonly record: StoredRecord }>();
  return {
    decode(key, bytes) {
      const known = seen.get(key);
      // Map order is insertion order: an entry read or replaced goes to the end, so the first
      // is always the least recently read.
      seen.delete(key);
      if (known?.bytes.equals(bytes)) {
        seen.set(key, known);
        return known.record;
      }
      const record = deepFreeze(decodeRecord(bytes));
      if (bytes.byteLength > limits.maxRecordBytes) return record;
      seen.set(key, { bytes: Buffer.from(bytes), record });
      if (seen.size > limits.maxRecords) {
        const oldest = seen.keys().next().value;
        if (oldest !== undefined) seen.delete(oldest);
      }
      return record;
    },
  };
}

/** Freezes a JSON value and everything in it. */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
