import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type OffloadBatchItem,
  OffloadBatchItemSchema,
  type OffloadBatchResponse,
  type OffloadHeader,
  type OffloadResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";

/** OffloadBatcherOptions configure createOffloadBatcher. */
export interface OffloadBatcherOptions {
  /**
   * Sends one OffloadBatch (retrying as the client's policy says). `timeoutMs` is the latest
   * deadline among its items, unset when one of them has none; `signal` aborts once no item
   * waits for the answer any more.
   */
  sendBatch(
    items: OffloadBatchItem[],
    timeoutMs: number | undefined,
    signal: AbortSignal,
  ): Promise<OffloadBatchResponse>;
  /** Offloads one payload on its own Offload stream: for servers without OffloadBatch. */
  sendOne(
    header: OffloadHeader,
    data: Uint8Array,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<OffloadResponse>;
  /** Most items in one batch; default 256. */
  readonly maxItems?: number;
  /** Most payload bytes in one batch; default 1 MiB. */
  readonly maxBytes?: number;
}

/** OffloadBatcher commits small payloads, sharing one OffloadBatch call between concurrent ones. */
export interface OffloadBatcher {
  /**
   * offload commits data under header and settles like a single Offload call would: with the
   * response, with the status the server gave this item, with CANCELED when `signal` aborts
   * first, or with DEADLINE_EXCEEDED once `timeoutMs` has passed. A call that gave up may still
   * have committed (whole, never in part), as a cancelled Offload may; retrying it is safe.
   */
  offload(
    header: OffloadHeader,
    data: Uint8Array,
    call: { readonly timeoutMs?: number | undefined; readonly signal?: AbortSignal | undefined },
  ): Promise<OffloadResponse>;
}

interface Pending {
  readonly header: OffloadHeader;
  readonly data: Uint8Array;
  readonly deadline: number | undefined;
  readonly signal: AbortSignal | undefined;
  /** Settles the caller's promise once; later calls do nothing. */
  settle(outcome: { response: OffloadResponse } | { error: unknown }): void;
  /** Whether the caller still waits (no result, abort or timeout yet). */
  waiting(): boolean;
  /** Runs when the pending item's caller stops waiting. */
  onGone: (() => void) | undefined;
}

const schedule: (task: () => void) => void =
  typeof setImmediate === "function" ? (task) => setImmediate(task) : (task) => setTimeout(task, 0);

/**
 * createOffloadBatcher returns an OffloadBatcher that collects the offloads started within one
 * turn of the event loop and sends them as one OffloadBatch (or a few, at most `maxItems` items
 * and `maxBytes` payload bytes each) at the end of that turn: no timer, so a lone offload waits
 * for nothing, and 32 concurrent ones cost one call instead of 32. Each item keeps its own
 * deadline and cancellation. A server that answers OffloadBatch with UNIMPLEMENTED (an older
 * replica) gets every item on its own Offload stream from then on. An item answered ABORTED
 * (nothing of it committed: the reply had no room for its answer) is sent again on its own
 * Offload stream, once; what that answers is the item's outcome.
 */
export function createOffloadBatcher(opts: OffloadBatcherOptions): OffloadBatcher {
  const maxItems = opts.maxItems ?? 256;
  const maxBytes = opts.maxBytes ?? 1024 * 1024;
  let queue: Pending[] = [];
  let scheduled = false;
  let batchUnsupported = false;

  const flush = () => {
    scheduled = false;
    const ready = queue.filter((p) => p.waiting());
    queue = [];
    let batch: Pending[] = [];
    let bytes = 0;
    for (const pending of ready) {
      const size = pending.data.byteLength;
      if (batch.length > 0 && (batch.length >= maxItems || bytes + size > maxBytes)) {
        void send(batch);
        batch = [];
        bytes = 0;
      }
      batch.push(pending);
      bytes += size;
    }
    if (batch.length > 0) void send(batch);
  };

  const sendAlone = async (pending: Pending) => {
    const timeoutMs = pending.deadline === undefined ? undefined : pending.deadline - Date.now();
    try {
      const response = await opts.sendOne(pending.header, pending.data, timeoutMs, pending.signal);
      pending.settle({ response });
    } catch (error) {
      pending.settle({ error });
    }
  };

  const send = async (batch: Pending[]) => {
    if (batchUnsupported) {
      await Promise.all(batch.map(sendAlone));
      return;
    }
    const controller = new AbortController();
    let left = batch.length;
    let answered = false;
    for (const pending of batch) {
      pending.onGone = () => {
        left -= 1;
        // Once answered, the call is over: aborting it would only build an AbortError and
        // dispatch it to listeners with nothing left to stop, once per batch.
        if (left === 0 && !answered) controller.abort();
      };
    }
    const deadlines = batch.map((p) => p.deadline);
    const timeoutMs = deadlines.includes(undefined)
      ? undefined
      : Math.max(...(deadlines as number[])) - Date.now();
    let response: OffloadBatchResponse;
    try {
      response = await opts.sendBatch(
        batch.map((p) => create(OffloadBatchItemSchema, { header: p.header, data: p.data })),
        timeoutMs,
        controller.signal,
      );
    } catch (error) {
      answered = true;
      if (ConnectError.from(error).code === Code.Unimplemented) {
        batchUnsupported = true;
        await Promise.all(batch.map(sendAlone));
        return;
      }
      for (const pending of batch) pending.settle({ error });
      return;
    }
    answered = true;
    const again: Pending[] = [];
    if (response.results.length !== batch.length) {
      const error = new ConnectError(
        `protocol error: ${response.results.length} results for a batch of ${batch.length}`,
        Code.Internal,
      );
      for (const pending of batch) pending.settle({ error });
      return;
    }
    batch.forEach((pending, i) => {
      const result = response.results[i]?.result;
      if (result?.case === "offloaded") {
        pending.settle({ response: result.value });
      } else if (result?.case === "error" && result.value.code === Code.Aborted) {
        // Nothing of it was committed: the reply had no room for its answer, a merge was
        // writing its handle, or a DeleteRun of its run took it away. Its own Offload stream
        // answers it, whatever it is.
        again.push(pending);
      } else if (result?.case === "error") {
        pending.settle({ error: new ConnectError(result.value.message, result.value.code) });
      } else {
        pending.settle({
          error: new ConnectError(`protocol error: batch result ${i} is empty`, Code.Internal),
        });
      }
    });
    await Promise.all(again.filter((p) => p.waiting()).map(sendAlone));
  };

  return {
    offload(header, data, call) {
      return new Promise<OffloadResponse>((resolve, reject) => {
        const { signal, timeoutMs } = call;
        if (signal?.aborted) {
          reject(ConnectError.from(signal.reason, Code.Canceled));
          return;
        }
        let settled = false;
        let timer: ReturnType<typeof setTimeout> | undefined;
        const onAbort = () =>
          pending.settle({ error: ConnectError.from(signal?.reason, Code.Canceled) });
        const pending: Pending = {
          header,
          data,
          deadline: timeoutMs === undefined ? undefined : Date.now() + timeoutMs,
          signal,
          waiting: () => !settled,
          onGone: undefined,
          settle(outcome) {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            pending.onGone?.();
            if ("response" in outcome) resolve(outcome.response);
            else reject(outcome.error);
          },
        };
        if (timeoutMs !== undefined) {
          timer = setTimeout(
            () =>
              pending.settle({
                error: new ConnectError("the operation timed out", Code.DeadlineExceeded),
              }),
            Math.max(0, timeoutMs),
          );
        }
        signal?.addEventListener("abort", onAbort, { once: true });
        queue.push(pending);
        if (!scheduled) {
          scheduled = true;
          schedule(flush);
        }
      });
    },
  };
}
