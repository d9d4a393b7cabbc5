import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type OffloadBatchItem,
  type OffloadBatchRequest,
  type OffloadBatchResponse,
  OffloadBatchResponseSchema,
  type OffloadBatchResult,
  OffloadBatchResultSchema,
  type OffloadResponse,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { abortReason } from "./backends/body.js";
import { attemptOf, handleFor } from "./keys.js";
import { limitsForTenant, type TenantLimits } from "./limits.js";
import { isCommitted, type OffloadDeps, offloadWhole } from "./offload.js";
import { fieldBytes, MAX_REPLY_BYTES } from "./reply-size.js";
import type { Runs } from "./runs.js";

/** MAX_BATCH_ITEMS is the most items one OffloadBatch may carry (the proto's max_items). */
export const MAX_BATCH_ITEMS = 1000;

/**
 * BATCH_ITEMS_IN_FLIGHT bounds how many items of one batch are committed at once, so that a
 * batch of a thousand items does not put a thousand writes on the store at the same moment.
 */
export const BATCH_ITEMS_IN_FLIGHT = 32;

/** ITEM_MESSAGE_BYTES bounds an item's error message in the reply (UTF-8, longer ones cut). */
export const ITEM_MESSAGE_BYTES = 1024;

/**
 * The most an item's error takes in the reply: the results entry (field 1) holding an
 * OffloadBatchResult whose `error` (field 2) holds a code (a one-byte varint, 1 to 16) and the
 * message. 1,035 bytes; for 1,000 items 1,035,000, a quarter of the reply.
 */
const errorAnswerBytes = fieldBytes(fieldBytes(2 + fieldBytes(ITEM_MESSAGE_BYTES)));

/**
 * offloadBatch commits every item of an OffloadBatch for tenant, BATCH_ITEMS_IN_FLIGHT at a
 * time (one at a time under a run limit), each exactly as its own Offload would be
 * (offloadWhole), and answers each in request order: its OffloadResponse, or the status its
 * Offload would have failed with. One item's failure never touches another's commit. The call
 * as a whole fails only when the batch is malformed (no items, too many) or the call itself
 * ends (cancelled, past its deadline): then the outcome of items still in flight is unknown to
 * the caller, as for any cancelled Offload, and each item's retry is safe because offloads are
 * idempotent.
 *
 * A failure that is not a ConnectError is a server fault: the item answers INTERNAL with a
 * generic message, as a failed call would, never the fault's own text. `onItemFailure` hears
 * of every failed item with the status it answered (a fault's original error as its cause).
 *
 * Items naming the same output (run and handle) are committed one after another in request
 * order: the first commits, and each later one answers as a repeated Offload would (the
 * committed record for the same bytes, ALREADY_EXISTS for others).
 *
 * The reply is at most MAX_REPLY_BYTES, so a client with gRPC's default receive limit reads it:
 * its answers are admitted in request order (createReplyRoom), each right before its commit, and
 * an item whose answer does not fit is refused before anything of it is committed (ABORTED:
 * send it again). Records carry previews of up to 20,000 + 20,000 characters twice (head and
 * tail, and the rendered text), ~320 KB of four-byte characters, so 15 of them passed 4 MiB.
 * Error messages are cut to ITEM_MESSAGE_BYTES so that every answer's room is known.
 */
export async function offloadBatch(
  deps: OffloadDeps,
  tenant: string,
  request: OffloadBatchRequest,
  signal: AbortSignal,
  tenantLimits: TenantLimits = {},
  onItemFailure?: (index: number, error: unknown) => void,
): Promise<OffloadBatchResponse> {
  // The proto's item count rule, by hand: protovalidate would check every item's header as
  // well and refuse the whole batch for one bad item, which must only fail that item.
  const count = request.items.length;
  if (count === 0 || count > MAX_BATCH_ITEMS) {
    throw new ConnectError(
      `items: a batch carries 1 to ${MAX_BATCH_ITEMS} items, got ${count}`,
      Code.InvalidArgument,
    );
  }
  // Every item of one run sees the same run state, read once for the whole batch: on an object
  // store that is two requests per run instead of two per item.
  const shared = { ...deps, runs: readOncePerRun(deps.runs) };
  // An SDK retries a batch whole, so its first item tells whether this is a retry: then every
  // item is looked up before it is written (a replay writes nothing); otherwise small items
  // commit without a lookup each (offloadWhole's lookUpFirst), and the few replays among them
  // find their records when their create-only commits are refused.
  const lookUpFirst = await isCommitted(shared, tenant, request.items[0]?.header, signal);
  const after = earlierSameOutput(request.items);
  const room = createReplyRoom(count, MAX_REPLY_BYTES);
  const done: Promise<unknown>[] = [];
  const commitItem = (item: OffloadBatchItem, index: number): Promise<OffloadBatchResult> => {
    const earlier = after[index];
    // Committed at once, two items of one output raced for it and either could win.
    const result =
      earlier === undefined
        ? answerItem(item, index)
        : (done[earlier] ?? Promise.resolve()).then(() => answerItem(item, index));
    done[index] = result;
    return result;
  };
  const answerItem = async (item: OffloadBatchItem, index: number): Promise<OffloadBatchResult> => {
    // The room held for this item's answer once it asked (0: refused), undefined before.
    let held: number | undefined;
    // The answer measured for the room, so the same answer is not encoded again.
    let measured: { answer: OffloadResponse; size: number } | undefined;
    const fail = (err: unknown): OffloadBatchResult => {
      const failure =
        err instanceof ConnectError
          ? err
          : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
      onItemFailure?.(index, failure);
      const message = clipUtf8(failure.rawMessage, ITEM_MESSAGE_BYTES);
      return create(OffloadBatchResultSchema, {
        result: { case: "error", value: { code: failure.code, message } },
      });
    };
    try {
      if (item.header === undefined) {
        throw new ConnectError("header: required", Code.InvalidArgument);
      }
      const offloaded = await offloadWhole(shared, tenant, item.header, item.data, signal, {
        tenantLimits,
        lookUpFirst,
        beforeCommit: async (answer) => {
          const size = answerBytes(answer);
          measured = { answer, size };
          // Another offload of the same bytes may commit first; its record's answer differs in
          // its times' encoding by a few bytes, which must not turn the item away.
          const wanted = size + answerSlackBytes;
          held = (await room.admit(index, wanted)) ? wanted : 0;
          if (held === 0) throw replyFull();
        },
      });
      const size = measured?.answer === offloaded ? measured.size : answerBytes(offloaded);
      if (held === undefined) held = (await room.admit(index, size)) ? size : 0;
      // Larger than held: a commit that found another offload's record of these bytes, whose
      // own preview options made its answer larger. Nothing was committed by this item.
      if (size > held) return fail(replyFull());
      return create(OffloadBatchResultSchema, { result: { case: "offloaded", value: offloaded } });
    } catch (err) {
      // An error always fits: every item's room holds at least errorAnswerBytes.
      if (held === undefined) await room.admit(index, errorAnswerBytes);
      return fail(err);
    }
  };
  // Under a run limit each item is measured against what the items before it committed, as
  // consecutive Offload calls would be; concurrent items would all see the same room.
  const concurrency =
    limitsForTenant(deps.limits, tenantLimits).maxRunBytes === undefined
      ? BATCH_ITEMS_IN_FLIGHT
      : 1;
  const results = await mapConcurrently(request.items, concurrency, commitItem);
  if (signal.aborted) throw abortReason(signal);
  return create(OffloadBatchResponseSchema, { results });
}

/** Room held beyond an item's measured answer, for a racing commit's equal but longer answer. */
const answerSlackBytes = 32;

/** The bytes an item answered with `answer` takes in the reply's results. */
function answerBytes(answer: OffloadResponse): number {
  const result = create(OffloadBatchResultSchema, { result: { case: "offloaded", value: answer } });
  return fieldBytes(toBinary(OffloadBatchResultSchema, result).byteLength);
}

/** The refusal of an item whose answer has no room left in the reply. */
function replyFull(): ConnectError {
  return new ConnectError(
    `the reply has no room left for this item's answer (a reply is at most ${MAX_REPLY_BYTES} bytes, what gRPC clients receive by default); nothing of it was committed: send it again, on its own or in another batch`,
    Code.Aborted,
  );
}

/** `text` cut to at most `bytes` bytes of UTF-8, never inside a character, ending in `…` when cut. */
export function clipUtf8(text: string, bytes: number): string {
  const encoded = Buffer.from(text, "utf8");
  if (encoded.byteLength <= bytes) return text;
  let end = bytes - 3;
  while (end > 0 && ((encoded[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${encoded.subarray(0, end).toString("utf8")}…`;
}

/**
 * ReplyRoom admits the answers of a batch of `count` items into a reply of at most `bytes`, in
 * request order whatever order they come in: each answer is admitted when the previous item's
 * was, so the same batch on the same store admits the same items.
 */
interface ReplyRoom {
  /**
   * Called exactly once per item, with the bytes its answer takes: true when it fits (the room
   * of max(size, errorAnswerBytes) is then held for it, so it may still end in an error), false
   * when not (errorAnswerBytes are held for its refusal). Every later item keeps room for an
   * error, so an answer that fits never leaves a later item without room for its refusal.
   */
  admit(index: number, size: number): Promise<boolean>;
}

/**
 * createReplyRoom makes the ReplyRoom of a batch of `count` items. Invariant, before item i is
 * admitted: used + (count - i) * errorAnswerBytes <= bytes, which holds for i = 0 as long as
 * count * errorAnswerBytes <= bytes (1,035,000 <= 4 MiB for 1,000 items) and after every
 * admission, fitting or not; so the reply, at most the sum held, stays within `bytes`.
 */
function createReplyRoom(count: number, bytes: number): ReplyRoom {
  let used = 0;
  let turn = 0;
  const waiting = new Map<number, () => void>();
  return {
    async admit(index, size) {
      if (index !== turn) await new Promise<void>((resolve) => waiting.set(index, resolve));
      const need = Math.max(size, errorAnswerBytes);
      const fits = used + need + (count - index - 1) * errorAnswerBytes <= bytes;
      used += fits ? need : errorAnswerBytes;
      turn++;
      const next = waiting.get(turn);
      waiting.delete(turn);
      next?.();
      return fits;
    },
  };
}

/**
 * For each item, the index of the last item before it that names the same output (run id and
 * handle), or undefined. Items whose key cannot make a handle are left alone: they fail anyway.
 */
function earlierSameOutput(items: readonly OffloadBatchItem[]): (number | undefined)[] {
  const last = new Map<string, number>();
  return items.map((item, index) => {
    const key = item.header?.key;
    if (key === undefined) return undefined;
    let output: string;
    try {
      output = JSON.stringify([
        key.runId,
        handleFor(key.callId, item.header?.slot, attemptOf(key.attempt)),
      ]);
    } catch {
      return undefined;
    }
    const before = last.get(output);
    last.set(output, index);
    return before;
  });
}

/**
 * Wraps runs so that whether a run was deleted and when it expires are read once per run and
 * shared by every later question about it (failures too).
 */
function readOncePerRun(runs: Runs): Runs {
  const deleted = new Map<string, Promise<boolean>>();
  const expires = new Map<string, Promise<number | undefined>>();
  const once = <T>(memo: Map<string, Promise<T>>, key: string, read: () => Promise<T>) => {
    let answer = memo.get(key);
    if (answer === undefined) {
      answer = read();
      memo.set(key, answer);
    }
    return answer;
  };
  return {
    ...runs,
    isDeleted: (tenant, runId, signal) =>
      once(deleted, JSON.stringify([tenant, runId]), () => runs.isDeleted(tenant, runId, signal)),
    expiresMs: (tenant, runId, signal) =>
      once(expires, JSON.stringify([tenant, runId]), () => runs.expiresMs(tenant, runId, signal)),
  };
}

/** Maps items through each with at most `limit` calls in flight; results keep the items' order. */
async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  each: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await each(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
