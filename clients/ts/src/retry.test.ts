import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
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
  it("accepts UNAVAILABLE and a proxy's stream reset, nothing else", () => {
    expect(isTransientError(new ConnectError("down", Code.Unavailable))).toBe(true);
    expect(
      isTransientError(
        new ConnectError("Stream closed with error code NGHTTP2_INTERNAL_ERROR", Code.Internal),
      ),
    ).toBe(true);
    expect(isTransientError(new ConnectError("bug", Code.Internal))).toBe(false);
    expect(isTransientError(new ConnectError("no", Code.PermissionDenied))).toBe(false);
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
