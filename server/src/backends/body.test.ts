import { getEventListeners } from "node:events";
import { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  abortableBody,
  abortReason,
  bytesBody,
  emptyBody,
  raceAbort,
  readAllBytes,
  responseBody,
  throwIfAborted,
} from "./body.js";

async function* chunks(...parts: number[][]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield Uint8Array.from(part);
}

async function codeOf(pending: Promise<unknown>): Promise<Code | string> {
  try {
    await pending;
    return "ok";
  } catch (err) {
    return err instanceof ConnectError ? err.code : `not a ConnectError: ${String(err)}`;
  }
}

describe("readAllBytes", () => {
  it("concatenates chunks into a copy that does not alias them", async () => {
    const reused = new Uint8Array(2);
    async function* reusing(): AsyncGenerator<Uint8Array> {
      reused.set([1, 2]);
      yield reused;
      reused.set([3, 4]);
      yield reused;
    }
    const all = await readAllBytes(reusing());
    reused.fill(9);
    expect(all).toEqual(Uint8Array.of(1, 2, 3, 4));
  });

  it("reads a buffer presented by bytesBody as a copy, within maxBytes", async () => {
    const bytes = Uint8Array.of(1, 2, 3);
    const all = await readAllBytes(bytesBody(bytes), 3);
    bytes.fill(9);
    expect(all).toEqual(Uint8Array.of(1, 2, 3));
    expect(await readAllBytes(bytesBody(new Uint8Array(0)))).toEqual(new Uint8Array(0));
    expect(await codeOf(readAllBytes(bytesBody(Uint8Array.of(1, 2, 3, 4)), 3))).toBe(
      Code.ResourceExhausted,
    );
  });

  it("reads an empty stream as an empty buffer", async () => {
    expect(await readAllBytes(chunks())).toEqual(new Uint8Array(0));
  });

  it("accepts exactly maxBytes and refuses one more with RESOURCE_EXHAUSTED", async () => {
    expect(await readAllBytes(chunks([1, 2], [3]), 3)).toEqual(Uint8Array.of(1, 2, 3));
    expect(await codeOf(readAllBytes(chunks([1, 2], [3, 4]), 3))).toBe(Code.ResourceExhausted);
  });

  it("stops reading the stream once the limit is passed", async () => {
    let produced = 0;
    async function* endless(): AsyncGenerator<Uint8Array> {
      for (;;) {
        produced++;
        yield new Uint8Array(10);
      }
    }
    expect(await codeOf(readAllBytes(endless(), 25))).toBe(Code.ResourceExhausted);
    expect(produced).toBe(3);
  });
});

describe("bytesBody", () => {
  it("yields the bytes once per pass and can be read again", async () => {
    const body = bytesBody(Uint8Array.of(5, 6));
    expect(await readAllBytes(body)).toEqual(Uint8Array.of(5, 6));
    expect(await readAllBytes(body)).toEqual(Uint8Array.of(5, 6));
  });

  it("yields no chunk for an empty buffer", async () => {
    const seen: Uint8Array[] = [];
    for await (const chunk of bytesBody(new Uint8Array(0))) seen.push(chunk);
    expect(seen).toEqual([]);
  });
});

describe("emptyBody", () => {
  it("yields nothing, every time it is read", async () => {
    const body = emptyBody();
    expect(await readAllBytes(body)).toEqual(new Uint8Array(0));
    expect(await readAllBytes(body)).toEqual(new Uint8Array(0));
  });
});

describe("responseBody", () => {
  // Like every backend's mapping function, it passes a ConnectError (an abort's) through.
  const mapped = (err: unknown) =>
    err instanceof ConnectError
      ? err
      : new ConnectError(`mapped: ${String(err)}`, Code.Unavailable, undefined, undefined, err);

  it("streams the response and destroys it once read to the end", async () => {
    const stream = Readable.from([Buffer.from([1, 2]), Buffer.from([3])]);
    expect(await readAllBytes(responseBody(stream, undefined, mapped))).toEqual(
      Uint8Array.of(1, 2, 3),
    );
    expect(stream.destroyed).toBe(true);
  });

  it("destroys the response when the reader stops early", async () => {
    const stream = new Readable({ read() {} });
    stream.push(Buffer.from([1]));
    for await (const chunk of responseBody(stream, undefined, mapped)) {
      expect(chunk).toEqual(Buffer.from([1]));
      break;
    }
    expect(stream.destroyed).toBe(true);
  });

  it("maps a failing response through fail and destroys it", async () => {
    const stream = new Readable({
      read() {
        this.destroy(new Error("socket reset"));
      },
    });
    const err = await readAllBytes(responseBody(stream, undefined, mapped)).catch((e) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(Code.Unavailable);
    expect(err.rawMessage).toBe("mapped: Error: socket reset");
    expect(stream.destroyed).toBe(true);
  });

  it("ends at once with CANCELED when the signal aborts while the response is stalled", async () => {
    const stream = new Readable({ read() {} });
    stream.push(Buffer.from([1]));
    const controller = new AbortController();
    const reading = (async () => {
      for await (const _ of responseBody(stream, controller.signal, mapped)) controller.abort();
    })();
    expect(await codeOf(reading)).toBe(Code.Canceled);
    expect(stream.destroyed).toBe(true);
  });

  const idle = {
    ms: 50,
    error: () => new ConnectError("the store sent nothing", Code.Unavailable),
  };

  it("fails with the idle bound's error when the producer stalls while the reader waits", async () => {
    const stream = new Readable({ read() {} });
    stream.push(Buffer.from([1]));
    const err = await readAllBytes(responseBody(stream, undefined, mapped, idle)).catch((e) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.rawMessage).toBe("the store sent nothing");
    expect(stream.destroyed).toBe(true);
  });

  it("does not count the time the reader spends between reads against the idle bound", async () => {
    const stream = Readable.from([Buffer.from([1]), Buffer.from([2]), Buffer.from([3])]);
    const read: number[] = [];
    for await (const chunk of responseBody(stream, undefined, mapped, idle)) {
      read.push(...chunk);
      await new Promise((resolve) => setTimeout(resolve, 3 * idle.ms));
    }
    expect(read).toEqual([1, 2, 3]);
  });
});

describe("abortableBody", () => {
  it("passes a stream through unchanged while the signal stays quiet", async () => {
    const body = abortableBody(chunks([1], [2, 3]), new AbortController().signal);
    expect(await readAllBytes(body)).toEqual(Uint8Array.of(1, 2, 3));
  });

  it("rejects with CANCELED when aborted while the source is stalled, and closes the source", async () => {
    const controller = new AbortController();
    let closed = false;
    let release: () => void = () => undefined;
    async function* stalled(): AsyncGenerator<Uint8Array> {
      try {
        yield Uint8Array.of(1);
        await new Promise<void>((resolve) => {
          release = resolve;
          controller.abort();
        });
        yield Uint8Array.of(2);
      } finally {
        closed = true;
      }
    }
    expect(await codeOf(readAllBytes(abortableBody(stalled(), controller.signal)))).toBe(
      Code.Canceled,
    );
    release();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(closed).toBe(true);
  });

  it("passes a source's own error through", async () => {
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Uint8Array.of(1);
      throw new ConnectError("client went away", Code.Aborted);
    }
    const body = abortableBody(failing(), new AbortController().signal);
    expect(await codeOf(readAllBytes(body))).toBe(Code.Aborted);
  });
});

describe("abortReason and throwIfAborted", () => {
  it("maps a plain abort to CANCELED, a timeout to DEADLINE_EXCEEDED, a ConnectError as is", () => {
    expect(abortReason(AbortSignal.abort()).code).toBe(Code.Canceled);
    const timeout = new DOMException("timed out", "TimeoutError");
    expect(abortReason(AbortSignal.abort(timeout)).code).toBe(Code.DeadlineExceeded);
    const own = new ConnectError("shutting down", Code.Unavailable);
    expect(abortReason(AbortSignal.abort(own))).toBe(own);
  });

  it("throws only for an aborted signal", () => {
    expect(() => throwIfAborted(undefined)).not.toThrow();
    expect(() => throwIfAborted(new AbortController().signal)).not.toThrow();
    expect(() => throwIfAborted(AbortSignal.abort())).toThrow(ConnectError);
  });
});

describe("raceAbort", () => {
  it("settles like the pending promise while the signal stays quiet", async () => {
    const signal = new AbortController().signal;
    expect(await raceAbort(Promise.resolve(7), signal)).toBe(7);
    expect(
      await codeOf(raceAbort(Promise.reject(new ConnectError("x", Code.NotFound)), signal)),
    ).toBe(Code.NotFound);
  });

  it("ends every race still pending when the signal aborts, each with the abort's reason", async () => {
    const controller = new AbortController();
    const never = new Promise<never>(() => {});
    const races = Array.from({ length: 5 }, () => codeOf(raceAbort(never, controller.signal)));
    controller.abort(new ConnectError("gone", Code.Unavailable));
    expect(await Promise.all(races)).toEqual(Array(5).fill(Code.Unavailable));
  });

  it("rejects at once on a signal that has already aborted", async () => {
    expect(await codeOf(raceAbort(new Promise(() => {}), AbortSignal.abort()))).toBe(Code.Canceled);
  });

  it("leaves no listener on the signal once a race has settled", async () => {
    const controller = new AbortController();
    for (let i = 0; i < 100; i++) await raceAbort(Promise.resolve(i), controller.signal);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    const late = raceAbort(new Promise(() => {}), controller.signal);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    controller.abort();
    expect(await codeOf(late)).toBe(Code.Canceled);
  });
});
