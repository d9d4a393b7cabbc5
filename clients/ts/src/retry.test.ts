import { constants as http2 } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { fromResetCode } from "@spillway/wire";
import { describe, expect, it, vi } from "vitest";
import { isTransientError, retryUnavailable } from "./retry.js";

const unavailable = () => new ConnectError("down", Code.Unavailable);

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err instanceof ConnectError ? err.code : undefined;
  }
}

describe("retryUnavailable", () => {
  it("retries UNAVAILABLE until an attempt succeeds", async () => {
    let attempts = 0;
    const value = await retryUnavailable(
      async () => {
        attempts++;
        if (attempts < 3) throw unavailable();
        return "ok";
      },
      { retry: { baseDelayMs: 1 } },
    );
    expect(value).toBe("ok");
    expect(attempts).toBe(3);
  });

  it("stops after maxAttempts and rethrows the last error", async () => {
    let attempts = 0;
    const code = await codeOf(
      retryUnavailable(
        async () => {
          attempts++;
          throw unavailable();
        },
        { retry: { maxAttempts: 4, baseDelayMs: 1 } },
      ),
    );
    expect(code).toBe(Code.Unavailable);
    expect(attempts).toBe(4);
  });

  it("never retries another code", async () => {
    let attempts = 0;
    const code = await codeOf(
      retryUnavailable(async () => {
        attempts++;
        throw new ConnectError("late", Code.DeadlineExceeded);
      }),
    );
    expect(code).toBe(Code.DeadlineExceeded);
    expect(attempts).toBe(1);
  });

  it("does not retry a request that cannot be replayed", async () => {
    let attempts = 0;
    const code = await codeOf(
      retryUnavailable(
        async () => {
          attempts++;
          throw unavailable();
        },
        { retry: { baseDelayMs: 1 }, replayable: () => false },
      ),
    );
    expect(code).toBe(Code.Unavailable);
    expect(attempts).toBe(1);
  });

  it("passes the remaining deadline to each attempt", async () => {
    const seen: (number | undefined)[] = [];
    await retryUnavailable(
      async (timeoutMs) => {
        seen.push(timeoutMs);
        if (seen.length < 2) throw unavailable();
      },
      { retry: { baseDelayMs: 1 }, timeoutMs: 60_000 },
    );
    expect(seen).toHaveLength(2);
    for (const t of seen) {
      expect(t).toBeGreaterThan(0);
      expect(t).toBeLessThanOrEqual(60_000);
    }
  });

  it("draws each backoff between 0 and its ceiling (full jitter), within the deadline", async () => {
    const random = vi.spyOn(Math, "random");
    // Counts the attempts of one call that always fails, under a one-minute ceiling.
    const attemptsUnderMinuteCeiling = async () => {
      let attempts = 0;
      const code = await codeOf(
        retryUnavailable(
          async () => {
            attempts++;
            throw unavailable();
          },
          { retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 }, timeoutMs: 20_000 },
        ),
      );
      return { code, attempts };
    };
    try {
      // A draw of 0 sleeps nothing, even under a one-minute ceiling: every attempt runs.
      random.mockReturnValue(0);
      expect(await attemptsUnderMinuteCeiling()).toEqual({ code: Code.Unavailable, attempts: 3 });
      // A draw of 0.5 is a 30 s backoff, which would outlast the 20 s deadline: not slept.
      random.mockReturnValue(0.5);
      expect(await attemptsUnderMinuteCeiling()).toEqual({ code: Code.Unavailable, attempts: 1 });
    } finally {
      random.mockRestore();
    }
  });

  it("turns an abort during the backoff into CANCELED", async () => {
    const controller = new AbortController();
    let attempts = 0;
    const code = await codeOf(
      retryUnavailable(
        async () => {
          attempts++;
          setImmediate(() => controller.abort());
          throw unavailable();
        },
        { retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 }, signal: controller.signal },
      ),
    );
    expect(code).toBe(Code.Canceled);
    expect(attempts).toBe(1);
  });
});

describe("isTransientError", () => {
  // The same table as clients/python/tests/test_retries.py, in this stack's words for the reset
  // (the SDK's transport, and connect-node's); test/sdk-retries.test.ts meets it for real.
  const sdkReset = "http/2 stream closed with error code INTERNAL_ERROR (0x2)";
  const connectNodeReset = "Stream closed with error code NGHTTP2_INTERNAL_ERROR";
  it.each([
    [Code.Unavailable, "Received http2 header with status: 502", true],
    [Code.Unavailable, "connect ECONNREFUSED 127.0.0.1:50051", true],
    [Code.Unavailable, "server is draining", true],
    [Code.Internal, sdkReset, true],
    [Code.Internal, connectNodeReset, true],
    [Code.Internal, "http/2 stream closed with error code CANCEL (0x8)", false],
    [Code.Internal, "store answered an unexpected status", false],
    [Code.Internal, "", false],
    [Code.DeadlineExceeded, "deadline exceeded", false],
    [Code.Canceled, "canceled", false],
    [Code.Unknown, sdkReset, false],
    [Code.ResourceExhausted, "too many calls", false],
    [Code.PermissionDenied, "invalid_deferred_handle", false],
    [Code.AlreadyExists, "run exists", false],
    [Code.DataLoss, "sha256 mismatch", false],
  ] as const)("%s %j -> %s", (code, message, transient) => {
    expect(isTransientError(new ConnectError(message, code))).toBe(transient);
  });

  it("retries the error the wire layer makes of an INTERNAL_ERROR reset", () => {
    const err = fromResetCode(http2.NGHTTP2_INTERNAL_ERROR);
    expect(err !== undefined && isTransientError(err)).toBe(true);
  });

  it("lets retryUnavailable repeat a reset read", async () => {
    let attempts = 0;
    const value = await retryUnavailable(
      async () => {
        attempts++;
        if (attempts === 1) {
          throw new ConnectError(
            "Stream closed with error code NGHTTP2_INTERNAL_ERROR",
            Code.Internal,
          );
        }
        return "window";
      },
      { retryable: isTransientError, retry: { baseDelayMs: 1 } },
    );
    expect(value).toBe("window");
    expect(attempts).toBe(2);
  });
});
