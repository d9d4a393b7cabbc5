import { createHash } from "node:crypto";
import { Worker } from "node:worker_threads";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Payloads smaller than this are hashed on the caller's thread: a worker's hand-offs would cost
 * more than the ~3 ms the hashing takes.
 */
const OFF_THREAD_MIN_BYTES = 4 * 1024 * 1024;
/** Bytes one hash may have waiting for the worker before update waits for room. */
const RING_BYTES = 8 * 1024 * 1024;
/** Bytes gathered in the ring before they are handed to the worker in one message. */
const SLICE_BYTES = 1024 * 1024;

/**
 * The worker's whole program: one sha256 state per open hash, fed from that hash's shared ring
 * in the order slices arrive, each slice acknowledged once hashed so its room can be reused.
 */
const workerSource = `
import { parentPort } from "node:worker_threads";
import { createHash } from "node:crypto";
const hashes = new Map();
parentPort.on("message", (m) => {
  const h = hashes.get(m.id);
  if (m.type === "open") {
    hashes.set(m.id, { hash: createHash("sha256"), ring: new Uint8Array(m.ring) });
  } else if (m.type === "data" && h !== undefined) {
    h.hash.update(h.ring.subarray(m.start, m.start + m.length));
    parentPort.postMessage({ type: "consumed", id: m.id, length: m.length });
  } else if (m.type === "end" && h !== undefined) {
    hashes.delete(m.id);
    parentPort.postMessage({ type: "digest", id: m.id, hex: h.hash.digest("hex") });
  } else if (m.type === "drop") {
    hashes.delete(m.id);
  }
});
`;

/** Sha256Hash is one running sha256 over bytes handed to it in order. */
export interface Sha256Hash {
  /**
   * update adds bytes to the hash. They are copied (or hashed) before it returns, or before
   * the promise it returns resolves, so the caller may reuse them then; it returns a promise
   * only while the worker is behind by a whole ring, and undefined otherwise.
   */
  update(bytes: Uint8Array): Promise<void> | undefined;
  /** digest resolves to the lowercase hex sha256 of every byte updated; call it once. */
  digest(): Promise<string>;
  /** dispose releases the hash; safe after digest, on failure, and more than once. */
  dispose(): void;
}

/** Sha256Hasher starts hashes that run off the caller's event loop when they are large. */
export interface Sha256Hasher {
  /**
   * hash starts a sha256 for about `expectedBytes` bytes: on a worker thread shared by the
   * hasher's hashes from OFF_THREAD_MIN_BYTES up, on the caller's thread below.
   */
  hash(expectedBytes: number): Sha256Hash;
}

interface WorkerMessage {
  readonly type: "consumed" | "digest";
  readonly id: number;
  readonly length?: number;
  readonly hex?: string;
}

interface OpenHash {
  consumed(length: number): void;
  digested(hex: string): void;
  failed(err: ConnectError): void;
}

/**
 * createSha256Hasher returns a hasher whose large hashes run on one worker thread, started on
 * first use. Each large hash copies its bytes into a shared ring of its own (8 MiB), so the
 * caller's event loop spends a copy, not the hashing, per byte. The worker keeps the process
 * alive only while a hash is open; if it dies, every open hash fails with INTERNAL and the next
 * hash starts a new worker.
 */
export function createSha256Hasher(): Sha256Hasher {
  let worker: Worker | undefined;
  let nextId = 1;
  const open = new Map<number, OpenHash>();

  function started(): Worker {
    if (worker !== undefined) return worker;
    // A data: URL is loaded as an ES module whatever the caller's module system or bundler.
    const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(workerSource)}`));
    const fail = (reason: string) => {
      if (worker === w) worker = undefined;
      const err = new ConnectError(`the sha256 worker ${reason}`, Code.Internal);
      for (const hash of open.values()) hash.failed(err);
      open.clear();
    };
    w.on("message", (m: WorkerMessage) => {
      const hash = open.get(m.id);
      if (m.type === "consumed") hash?.consumed(m.length ?? 0);
      else hash?.digested(m.hex ?? "");
    });
    w.on("error", (err) => fail(`failed: ${err.message}`));
    w.on("exit", (code) => fail(`exited with code ${code}`));
    worker = w;
    return w;
  }

  function closed(id: number) {
    open.delete(id);
    if (open.size === 0) worker?.unref();
  }

  return {
    hash(expectedBytes) {
      return expectedBytes < OFF_THREAD_MIN_BYTES ? inlineHash() : workerHash();
    },
  };

  function workerHash(): Sha256Hash {
    const w = started();
    w.ref();
    const id = nextId++;
    const sab = new SharedArrayBuffer(RING_BYTES);
    const ring = new Uint8Array(sab);
    let write = 0;
    let free = RING_BYTES;
    let sliceStart = 0;
    let sliceLength = 0;
    let failure: ConnectError | undefined;
    let wake: (() => void) | undefined;
    let result: { resolve(hex: string): void; reject(err: unknown): void } | undefined;
    let disposed = false;

    open.set(id, {
      consumed(length) {
        free += length;
        wake?.();
      },
      digested(hex) {
        closed(id);
        result?.resolve(hex);
      },
      failed(err) {
        failure = err;
        wake?.();
        result?.reject(err);
      },
    });
    w.postMessage({ type: "open", id, ring: sab });

    const flush = () => {
      if (sliceLength === 0) return;
      w.postMessage({ type: "data", id, start: sliceStart, length: sliceLength });
      sliceLength = 0;
    };

    /** copy puts bytes from offset on into the ring, and waits for room only when it must. */
    const copy = (bytes: Uint8Array, from: number): Promise<void> | undefined => {
      let offset = from;
      while (offset < bytes.byteLength) {
        if (failure !== undefined) return Promise.reject(failure);
        if (free === 0) {
          flush();
          const resume = offset;
          return new Promise<void>((resolve) => {
            wake = resolve;
          }).then(() => {
            wake = undefined;
            return copy(bytes, resume);
          });
        }
        if (write === RING_BYTES) {
          flush();
          write = 0;
        }
        if (sliceLength === 0) sliceStart = write;
        const n = Math.min(bytes.byteLength - offset, RING_BYTES - write, free);
        ring.set(bytes.subarray(offset, offset + n), write);
        offset += n;
        write += n;
        free -= n;
        sliceLength += n;
        if (sliceLength >= SLICE_BYTES) flush();
      }
      return undefined;
    };

    return {
      update(bytes) {
        return copy(bytes, 0);
      },
      digest() {
        if (failure !== undefined) return Promise.reject(failure);
        return new Promise<string>((resolve, reject) => {
          result = { resolve, reject };
          flush();
          w.postMessage({ type: "end", id });
        });
      },
      dispose() {
        if (disposed) return;
        disposed = true;
        if (open.has(id)) {
          w.postMessage({ type: "drop", id });
          closed(id);
        }
      },
    };
  }
}

/** inlineHash is a Sha256Hash computed on the caller's thread, for small payloads. */
function inlineHash(): Sha256Hash {
  const hash = createHash("sha256");
  return {
    update(bytes) {
      hash.update(bytes);
      return undefined;
    },
    async digest() {
      return hash.digest("hex");
    },
    dispose() {},
  };
}
