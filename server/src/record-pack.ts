import { Code, ConnectError } from "@connectrpc/connect";

/**
 * How a record pack begins: a JSON array whose first element names the format. A single record
 * is a JSON object and begins with `{`, so the first byte tells the two apart.
 */
const packFormat = "spillway-records";
const packVersion = 1;
const newline = 0x0a;

/** PackedRecord is one record of a pack: the key it is read under, and its encoded bytes. */
export interface PackedRecord {
  readonly key: string;
  readonly bytes: Uint8Array;
}

/** Where one record lies in a pack, in bytes from the pack's start. */
export interface PackSlice {
  readonly offset: number;
  readonly length: number;
}

/**
 * packHeadBytes is how much of a record object a reader reads first: a single record of up to
 * that size whole, or a pack's header line (encodeRecordPack keeps it within) and the records
 * that follow it within that many bytes.
 */
export const packHeadBytes = 64 * 1024;

/** The header line of a pack of records, newline included. */
function headerLine(records: readonly PackedRecord[]): string {
  let offset = 0;
  const entries = records.map((record) => {
    const entry = [record.key, offset, record.bytes.byteLength];
    offset += record.bytes.byteLength;
    return entry;
  });
  return `${JSON.stringify([packFormat, packVersion, entries])}\n`;
}

/**
 * packEntryBound bounds what one record adds to a pack's header line (its key, offset and
 * length), so a writer can tell how many records fit in packHeadBytes without encoding them.
 */
export function packEntryBound(key: string): number {
  // The JSON string of the key, two safe integers of at most 16 digits, brackets and commas.
  return Buffer.byteLength(JSON.stringify(key)) + 2 * 16 + 4;
}

/** packHeaderBound bounds the header line around entries of packEntryBound in all. */
export function packHeaderBound(entryBytes: number): number {
  return Buffer.byteLength(JSON.stringify([packFormat, packVersion, []])) + entryBytes + 1;
}

/**
 * encodeRecordPack lays several records out as one object: a header line
 * `["spillway-records",1,[[key,offset,length],...]]` and then the records' bytes back to back,
 * offsets counted from the end of the header line. The same object is stored under every
 * record's key (hard links on the filesystem), and each key reads only its own record. Records
 * whose header would outgrow packHeadBytes are refused with INTERNAL: the caller splits them
 * beforehand (packEntryBound, packHeaderBound).
 */
export function encodeRecordPack(records: readonly PackedRecord[]): Uint8Array {
  const header = Buffer.from(headerLine(records));
  if (header.byteLength > packHeadBytes) {
    throw new ConnectError("a record pack's header outgrew what readers read first", Code.Internal);
  }
  let size = header.byteLength;
  for (const record of records) size += record.bytes.byteLength;
  const pack = Buffer.allocUnsafe(size);
  header.copy(pack, 0);
  let at = header.byteLength;
  for (const record of records) {
    pack.set(record.bytes, at);
    at += record.bytes.byteLength;
  }
  return pack;
}

/** isRecordPack tells a pack from a single record by the object's first byte. */
export function isRecordPack(head: Uint8Array): boolean {
  return head[0] === 0x5b; // "["
}

/**
 * findInPack reads the header at the start of a pack (`head`, the pack's first bytes, which
 * must hold the whole header line) and returns where the record stored under `key` lies, or
 * undefined when the pack holds no record for that key. A header that is cut short or not the
 * format's is DATA_LOSS.
 */
export function findInPack(head: Uint8Array, key: string): PackSlice | undefined {
  const end = head.indexOf(newline);
  if (end < 0) throw corrupt("its header does not end within the bytes read");
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(head.buffer, head.byteOffset, end).toString("utf8"));
  } catch {
    throw corrupt("its header is not JSON");
  }
  if (
    !Array.isArray(header) ||
    header[0] !== packFormat ||
    header[1] !== packVersion ||
    !Array.isArray(header[2])
  ) {
    throw corrupt("its header has an unknown format");
  }
  for (const entry of header[2] as unknown[]) {
    if (!Array.isArray(entry) || entry[0] !== key) continue;
    const [, offset, length] = entry as unknown[];
    if (!isCount(offset) || !isCount(length)) throw corrupt("an entry's range is not a count");
    return { offset: end + 1 + offset, length };
  }
  return undefined;
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function corrupt(why: string): ConnectError {
  return new ConnectError(`stored record pack is corrupt: ${why}`, Code.DataLoss);
}
