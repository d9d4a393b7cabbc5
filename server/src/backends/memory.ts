import type {
  Backend,
  BackendCallOptions,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
} from "./backend.js";
import { abortableBody, readAllBytes, throwIfAborted } from "./body.js";
import { checkListLimit, checkRange } from "./call-options.js";
import { fromNodeError } from "./from-node-error.js";
import { alreadyExists, notFound } from "./object-errors.js";
import { checkKey, checkListPrefix } from "./object-key.js";

/** Largest chunk a memory get yields, so readers see a stream rather than one huge buffer. */
const chunkBytes = 256 * 1024;

interface StoredObject {
  readonly bytes: Uint8Array;
  readonly modifiedMs: number;
}

/**
 * createMemoryBackend returns a Backend (kind `memory`) that keeps objects in this process.
 *
 * Guarantees: the full Backend contract, with keys and list prefixes checked by the shared key
 * rules (`object-key.ts`) like every other backend's; bytes are copied on put and on get, so
 * neither the writer reusing its buffers nor a reader mutating what it got can change a stored
 * object; an aborted or failed put stores nothing; putMany shares one copy between its names.
 * Keys are compared by UTF-16 code unit, which is byte order for the ASCII keys the service
 * produces. Nothing survives the process.
 */
export function createMemoryBackend(): Backend {
  const objects = new Map<string, StoredObject>();

  return {
    kind: "memory",

    async put(key: string, body: AsyncIterable<Uint8Array>, opts?: BackendCallOptions) {
      const signal = opts?.signal;
      checkKey(key);
      throwIfAborted(signal);
      if (objects.has(key)) throw alreadyExists(key);
      const bytes = await collect(body, signal, key);
      // Check and insert with no await in between: concurrent puts of one key see one winner.
      if (objects.has(key)) throw alreadyExists(key);
      const stored: StoredObject = { bytes, modifiedMs: Date.now() };
      objects.set(key, stored);
      return { size: bytes.byteLength, modifiedMs: stored.modifiedMs };
    },

    async get(key: string, opts?: GetOptions) {
      const signal = opts?.signal;
      checkKey(key);
      throwIfAborted(signal);
      const { offset, length } = checkRange(opts);
      const stored = objects.get(key);
      if (stored === undefined) throw notFound(key);
      const start = Math.min(offset, stored.bytes.byteLength);
      const end =
        length === undefined
          ? stored.bytes.byteLength
          : Math.min(stored.bytes.byteLength, start + length);
      return readSlices(stored.bytes, start, end, signal);
    },

    async head(key: string, opts?: BackendCallOptions): Promise<ObjectInfo | undefined> {
      checkKey(key);
      throwIfAborted(opts?.signal);
      const stored = objects.get(key);
      return stored === undefined
        ? undefined
        : { size: stored.bytes.byteLength, modifiedMs: stored.modifiedMs };
    },

    async list(prefix: string, opts?: ListOptions): Promise<ListPage> {
      checkListPrefix(prefix);
      throwIfAborted(opts?.signal);
      const limit = checkListLimit(opts);
      const startAfter = opts?.startAfter;
      const matching = [...objects.keys()]
        .filter((k) => k.startsWith(prefix) && (startAfter === undefined || k > startAfter))
        .sort();
      return { keys: matching.slice(0, limit), truncated: matching.length > limit };
    },

    async putMany(
      keys: readonly string[],
      body: AsyncIterable<Uint8Array>,
      opts?: BackendCallOptions,
    ) {
      for (const key of keys) checkKey(key);
      const [first] = keys;
      if (first === undefined) return [];
      const bytes = await collect(body, opts?.signal, first);
      const stored: StoredObject = { bytes, modifiedMs: Date.now() };
      // Stored bytes are never mutated (copies go in and out), so the names can share them.
      return keys.map((key) => {
        if (objects.has(key)) return alreadyExists(key);
        objects.set(key, stored);
        return { size: bytes.byteLength, modifiedMs: stored.modifiedMs };
      });
    },

    async delete(key: string, opts?: BackendCallOptions): Promise<void> {
      checkKey(key);
      throwIfAborted(opts?.signal);
      objects.delete(key);
    },

    async deleteMany(keys: readonly string[], opts?: BackendCallOptions): Promise<void> {
      for (const key of keys) checkKey(key);
      throwIfAborted(opts?.signal);
      for (const key of keys) objects.delete(key);
    },

    async close(): Promise<void> {},
  };
}

/** A copy of everything body yields, in one buffer; an aborted signal or a failed body throws. */
async function collect(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
  key: string,
): Promise<Uint8Array> {
  throwIfAborted(signal);
  let bytes: Uint8Array;
  try {
    bytes = await readAllBytes(abortableBody(body, signal));
  } catch (err) {
    throw fromNodeError(err, key);
  }
  throwIfAborted(signal);
  return bytes;
}

async function* readSlices(
  bytes: Uint8Array,
  start: number,
  end: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array> {
  for (let at = start; at < end; at += chunkBytes) {
    throwIfAborted(signal);
    yield bytes.slice(at, Math.min(end, at + chunkBytes));
  }
}
