import { getEventListeners } from "node:events";
import { create, isMessage } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type Interceptor,
  type StreamResponse,
} from "@connectrpc/connect";
import {
  GetServerInfoResponseSchema,
  OffloadRequestSchema,
  OffloadResponseSchema,
  SpillwayService,
} from "@spillway/proto/spillway/v1/spillway_pb.js";
import { describe, expect, it, vi } from "vitest";
import { codeOf } from "../../../test/support/code-of.js";
import { runStreamingCall, runUnaryCall } from "./run-call.js";

const info = SpillwayService.method.getServerInfo;
const offload = SpillwayService.method.offload;
const common = <M extends typeof info | typeof offload>(method: M) => ({
  service: SpillwayService,
  method,
  requestMethod: "POST",
  url: "http://localhost/x",
  header: new Headers(),
  contextValues: createContextValues(),
});
const infoResponse = (signal: AbortSignal) => ({
  stream: false as const,
  service: SpillwayService,
  method: info,
  header: new Headers(),
  trailer: new Headers(),
  message: create(GetServerInfoResponseSchema, { version: signal.aborted ? "aborted" : "live" }),
});

describe("runUnaryCall", () => {
  it("runs interceptors outermost first on the created message, and ends the signal", async () => {
    const seen: string[] = [];
    const tag =
      (name: string): Interceptor =>
      (next) =>
      async (req) => {
        seen.push(`${name}:${isMessage(req.message) ? "message" : "init"}`);
        return next(req);
      };
    let signal: AbortSignal | undefined;
    const res = await runUnaryCall({
      interceptors: [tag("outer"), tag("inner")],
      req: { stream: false, ...common(info), message: {} },
      next: async (req) => {
        signal = req.signal;
        return infoResponse(req.signal);
      },
    });
    expect(seen).toEqual(["outer:message", "inner:message"]);
    expect(res.message.version).toBe("live");
    // Ended with a ConnectError reason, not a DOMException built per call.
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(ConnectError);
  });

  it("fails with CANCELED when the caller aborts, and forgets the caller's signal after", async () => {
    const caller = new AbortController();
    const call = runUnaryCall({
      signal: caller.signal,
      req: { stream: false, ...common(info), message: {} },
      next: (req) =>
        new Promise((_, reject) =>
          req.signal.addEventListener("abort", () => reject(req.signal.reason)),
        ),
    });
    caller.abort();
    expect(await codeOf(call)).toBe(Code.Canceled);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
  });

  it("fails with DEADLINE_EXCEEDED at the deadline", async () => {
    const call = runUnaryCall({
      timeoutMs: 20,
      req: { stream: false, ...common(info), message: {} },
      next: (req) =>
        new Promise((_, reject) =>
          req.signal.addEventListener("abort", () => reject(req.signal.reason)),
        ),
    });
    expect(await codeOf(call)).toBe(Code.DeadlineExceeded);
  });

  it("reports a stream cancelled at or past the deadline as DEADLINE_EXCEEDED", async () => {
    // A gRPC server resets the stream (CANCEL) at the deadline; when the reset is handled
    // before the client's own timer fires, the call still ran out of time, as grpc-go's
    // client and connectrpc's conformance suite take it.
    vi.useFakeTimers();
    try {
      const late = runUnaryCall({
        timeoutMs: 20,
        req: { stream: false, ...common(info), message: {} },
        next: () => {
          vi.setSystemTime(Date.now() + 20);
          return Promise.reject(new ConnectError("stream reset", Code.Canceled));
        },
      });
      const early = runUnaryCall({
        timeoutMs: 20,
        req: { stream: false, ...common(info), message: {} },
        next: () => Promise.reject(new ConnectError("stream reset", Code.Canceled)),
      });
      expect(await Promise.all([codeOf(late), codeOf(early)])).toEqual([
        Code.DeadlineExceeded,
        Code.Canceled,
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports any error as a ConnectError", async () => {
    const call = runUnaryCall({
      req: { stream: false, ...common(info), message: {} },
      next: () => Promise.reject(new Error("boom")),
    });
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unknown);
  });
});

describe("runStreamingCall", () => {
  it("creates request messages as they are read, and ends the signal with the response", async () => {
    async function* requests() {
      yield { msg: { case: "chunk" as const, value: new Uint8Array(3) } };
    }
    let signal: AbortSignal | undefined;
    const res = await runStreamingCall({
      req: { stream: true, ...common(offload), message: requests() },
      next: async (
        req,
      ): Promise<StreamResponse<typeof OffloadRequestSchema, typeof OffloadResponseSchema>> => {
        signal = req.signal;
        const sent = [];
        for await (const m of req.message) sent.push(m);
        expect(sent.every((m) => isMessage(m, OffloadRequestSchema))).toBe(true);
        return {
          stream: true,
          service: SpillwayService,
          method: offload,
          header: new Headers(),
          trailer: new Headers(),
          message: (async function* () {
            yield create(OffloadResponseSchema, { created: true });
          })(),
        };
      },
    });
    const out = [];
    for await (const m of res.message) out.push(m);
    expect(out.map((m) => m.created)).toEqual([true]);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(ConnectError);
  });

  it("closes the request messages when the caller aborts", async () => {
    let closed = false;
    async function* requests() {
      try {
        yield { msg: { case: "chunk" as const, value: new Uint8Array(1) } };
        await new Promise(() => {});
      } finally {
        closed = true;
      }
    }
    const caller = new AbortController();
    const input = requests();
    const call = runStreamingCall({
      signal: caller.signal,
      req: { stream: true, ...common(offload), message: input },
      next: (req) =>
        new Promise((_, reject) =>
          req.signal.addEventListener("abort", () => reject(req.signal.reason)),
        ),
    });
    // Started but suspended at its first yield, so closing it runs its finally block.
    await input.next();
    caller.abort();
    expect(await codeOf(call)).toBe(Code.Canceled);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(true);
  });

  it("keeps a request iterable that fails to close from throwing out of the deadline", async () => {
    const uncaught: unknown[] = [];
    const record = (err: unknown) => uncaught.push(err);
    process.on("uncaughtException", record);
    process.on("unhandledRejection", record);
    try {
      let closes = 0;
      // A hand-written iterable whose throw throws and whose return rejects.
      const input: AsyncIterable<{ msg: { case: "chunk"; value: Uint8Array } }> = {
        [Symbol.asyncIterator]: () => ({
          next: () => new Promise(() => {}),
          throw(err?: unknown) {
            closes++;
            throw err;
          },
          return() {
            closes++;
            return Promise.reject(new Error("cannot close"));
          },
        }),
      };
      const call = runStreamingCall({
        timeoutMs: 5,
        req: { stream: true, ...common(offload), message: input },
        next: (req) =>
          new Promise((_, reject) =>
            req.signal.addEventListener("abort", () => reject(req.signal.reason)),
          ),
      });
      expect(await codeOf(call)).toBe(Code.DeadlineExceeded);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(closes).toBe(2);
      expect(uncaught).toEqual([]);
    } finally {
      process.off("uncaughtException", record);
      process.off("unhandledRejection", record);
    }
  });

  it("ends the call when its caller stops reading, and lets the interceptors see the end", async () => {
    let signal: AbortSignal | undefined;
    let interceptorSawEnd = false;
    // An interceptor that only ever calls next() on the response, never return().
    const watch: Interceptor = (next) => async (req) => {
      const res = await next(req);
      if (!res.stream) return res;
      const inner = res.message;
      return {
        ...res,
        message: (async function* () {
          const it = inner[Symbol.asyncIterator]();
          try {
            for (;;) {
              const r = await it.next();
              if (r.done === true) break;
              yield r.value;
            }
          } finally {
            interceptorSawEnd = true;
          }
        })(),
      };
    };
    const res = await runStreamingCall({
      interceptors: [watch],
      req: { stream: true, ...common(offload), message: (async function* () {})() },
      next: async (req) => {
        signal = req.signal;
        return {
          stream: true,
          service: SpillwayService,
          method: offload,
          header: new Headers(),
          trailer: new Headers(),
          // Ends only once the call's signal is aborted, as a transport's response does.
          message: (async function* () {
            yield create(OffloadResponseSchema, { created: true });
            if (!req.signal.aborted) {
              await new Promise((resolve) =>
                req.signal.addEventListener("abort", resolve, { once: true }),
              );
            }
            throw ConnectError.from(req.signal.reason, Code.Canceled);
          })(),
        };
      },
    });
    for await (const m of res.message) {
      expect(m.created).toBe(true);
      break;
    }
    expect(signal?.aborted).toBe(true);
    expect(interceptorSawEnd).toBe(true);
  });
});
