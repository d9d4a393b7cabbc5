import { setMaxListeners } from "node:events";
import type { DescService } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";

/**
 * The abort listeners one call's (or one sweep's) signal may hold at once before Node warns of
 * a leak. Work fans out by design: ListRuns reads up to 8 runs of 16 records at once, MergeRun
 * and ForkRun write up to 64 records at a time, a sweep finishing a stale merge reads its
 * records in batches, and every store request in flight (an S3 request, a body being read)
 * listens on the signal until it ends. Node's default of 10 made such work on the S3 backend
 * print "Possible EventTarget memory leak detected" to the operator's log; beyond this bound a
 * warning would stand for a real leak again.
 */
export const fanOutListeners = 1024;

/** allowFanOut raises `signal`'s listener bound to fanOutListeners. */
export function allowFanOut(signal: AbortSignal): void {
  setMaxListeners(fanOutListeners, signal);
}

/**
 * allowCallFanOut returns `impl` with every method raising its call signal's listener bound
 * (allowFanOut) before it runs; what the methods do is unchanged.
 */
export function allowCallFanOut<S extends DescService>(impl: ServiceImpl<S>): ServiceImpl<S> {
  const wrapped: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(impl)) {
    const fn = method as (req: unknown, ctx: HandlerContext) => unknown;
    wrapped[name] = (req: unknown, ctx: HandlerContext) => {
      allowFanOut(ctx.signal);
      return fn(req, ctx);
    };
  }
  return wrapped as ServiceImpl<S>;
}
