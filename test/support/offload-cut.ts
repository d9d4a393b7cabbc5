import type { Interceptor } from "@connectrpc/connect";

/** attemptCounter counts the attempts of each method: every retry passes through it. */
export function attemptCounter(): { interceptor: Interceptor; count: Map<string, number> } {
  const count = new Map<string, number>();
  const interceptor: Interceptor = (next) => (req) => {
    count.set(req.method.name, (count.get(req.method.name) ?? 0) + 1);
    return next(req);
  };
  return { interceptor, count };
}

/**
 * cutFirstOffload is an interceptor that runs `cut` once, after 8 of the first Offload's
 * request messages (8 MiB of 1 MiB chunks) were handed to the transport, and `after` once that
 * attempt has ended: a replica killed mid-upload, and (with `after`) brought back before the
 * SDK sees the failure.
 */
export function cutFirstOffload(
  cut: () => Promise<void>,
  after: () => Promise<void> = async () => {},
): Interceptor {
  let fired = false;
  return (next) => async (req) => {
    if (!req.stream || req.method.name !== "Offload" || fired) return next(req);
    fired = true;
    const messages = req.message;
    async function* cutting() {
      let i = 0;
      for await (const m of messages) {
        if (i++ === 8) await cut();
        yield m;
      }
    }
    try {
      return await next({ ...req, message: cutting() });
    } finally {
      await after();
    }
  };
}
