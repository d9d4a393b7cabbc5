import { createHash } from "node:crypto";
import { Worker } from "node:worker_threads";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Payloads smaller than this are hashed on the caller's thread: a worker's hand-offs would cost
 * more than the ~3 ms the hashing takes.
 */
const OFF_THREAD_MIN_BYTES = 4 * 1024 * 1024;
/** Bytes copied into one slab before the slab is handed to the worker. */
const SLAB_BYTES = 1024 * 1024;
/** Slabs one hash may have with the worker before update waits for one to come back. */
const SLABS_IN_FLIGHT = 8;

/**
 * The worker's whole program: one sha256 state per open hash, fed slabs in the order they
 * arrive; each slab goes back to the caller (transferred, not copied) once hashed.
 */
const workerSource = `
import { parentPort } from "node:worker_threads";
import { createHash } from "node:crypto";
const hashes = new Map();
parentPort.on("message", (m) => {
  const hash = hashes.get(m.id);
  if (m.type === "open") {
    hashes.set(m.id, createHash("sha256"));
  } else if (m.type === "data") {
    hash?.update(new Uint8Array(m.slab, 0, m.length));
    parentPort.postMessage({ type: "consumed", id: m.id, slab: m.slab }, [m.slab]);
  } else if (m.type === "end" && hash !== undefined) {
    hashes.delete(m.id);
    parentPort.postMessage({ type: "digest", id: m.id, hex: hash.digest("hex") });
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
   * only while the worker holds every slab, and undefined otherwise.
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
  /**
   * close ends the worker thread, if one was started: every hash still open fails with
   * CANCELED, and hash refuses with CANCELED from then on. Safe to call more than once.
   */
  close(): Promise<void>;
}

interface WorkerMessage {
  readonly type: "consumed" | "digest";
  readonly id: number;
  readonly slab?: ArrayBuffer;
  readonly hex?: string;
}

interface OpenHash {
  consumed(slab: ArrayBuffer): void;
  digested(hex: string): void;
  failed(err: ConnectError): void;
}

/**
 * createSha256Hasher returns a hasher whose large hashes run on one worker thread, started on
 * first use. Each large hash copies its bytes into 1 MiB slabs of its own (at most 8), which
 * move to the worker and back without copying, so the caller's event loop spends a copy, not
 * the hashing, per byte. The worker keeps the process
 * alive only while a hash is open; if it dies, every open hash fails with INTERNAL and the next
 * hash starts a new worker.
 */
export function createSha256Hasher(): Sha256Hasher {
  let worker: Worker | undefined;
  let nextId = 1;
  const open = new Map<number, OpenHash>();
  let closed: ConnectError | undefined;

  function started(): Worker {
    if (worker !== undefined) return worker;
    // A data: URL is loaded as an ES module whatever the caller's module system or bundler.
    const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(workerSource)}`));
    const fail = (reason: string) => {
      if (worker === w) worker = undefined;
      const err = closed ?? new ConnectError(`the sha256 worker ${reason}`, Code.Internal);
      for (const hash of open.values()) hash.failed(err);
      open.clear();
    };
    w.on("message", (m: WorkerMessage) => {
      const hash = open.get(m.id);
      if (m.type === "consumed") {
        if (m.slab !== undefined) hash?.consumed(m.slab);
      } else hash?.digested(m.hex ?? "");
    });
    w.on("error", (err) => fail(`failed: ${err.message}`));
    w.on("exit", (code) => fail(`exited with code ${code}`));
    worker = w;
    return w;
  }

  function ended(id: number) {
    open.delete(id);
    if (open.size === 0) worker?.unref();
  }

  return {
    hash(expectedBytes) {
      if (closed !== undefined) throw closed;
      return expectedBytes < OFF_THREAD_MIN_BYTES ? inlineHash() : workerHash();
    },
    async close() {
      closed ??= new ConnectError("the sha256 hasher was closed", Code.Canceled);
      const w = worker;
      worker = undefined;
      // Its exit fails the hashes still open, with `closed`.
      if (w !== undefined) await w.terminate();
    },
  };

  function workerHash(): Sha256Hash {
    const w = started();
    w.ref();
    const id = nextId++;
    // Slabs are plain ArrayBuffers moved between the threads: a copy into one is a memcpy,
    // where copying into a SharedArrayBuffer ring ran at a third of that speed.
    const free: ArrayBuffer[] = [];
    let slabs = 0;
    let slab: Uint8Array | undefined;
    let filled = 0;
    let failure: ConnectError | undefined;
    let wake: (() => void) | undefined;
    let result: { resolve(hex: string): void; reject(err: unknown): void } | undefined;
    let disposed = false;

    open.set(id, {
      consumed(returned) {
        free.push(returned);
        wake?.();
      },
      digested(hex) {
        ended(id);
        result?.resolve(hex);
      },
      failed(err) {
        failure = err;
        wake?.();
        result?.reject(err);
      },
    });
    w.postMessage({ type: "open", id });

    const flush = () => {
      if (slab === undefined || filled === 0) return;
      const buffer = slab.buffer as ArrayBuffer;
      w.postMessage({ type: "data", id, slab: buffer, length: filled }, [buffer]);
      slab = undefined;
      filled = 0;
    };

    /** copy puts bytes from offset on into slabs, and waits for one only when all are out. */
    const copy = (bytes: Uint8Array, from: number): Promise<void> | undefined => {
      let offset = from;
      while (offset < bytes.byteLength) {
        if (failure !== undefined) return Promise.reject(failure);
        if (slab === undefined) {
          const reused = free.pop();
          if (reused !== undefined) slab = new Uint8Array(reused);
          else if (slabs < SLABS_IN_FLIGHT) {
            slabs++;
            slab = new Uint8Array(SLAB_BYTES);
          } else {
            const resume = offset;
            return new Promise<void>((resolve) => {
              wake = resolve;
            }).then(() => {
              wake = undefined;
              return copy(bytes, resume);
            });
          }
        }
        const n = Math.min(bytes.byteLength - offset, SLAB_BYTES - filled);
        slab.set(bytes.subarray(offset, offset + n), filled);
        offset += n;
        filled += n;
        if (filled === SLAB_BYTES) flush();
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
          ended(id);
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
