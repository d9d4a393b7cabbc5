import type { Http2Session } from "node:http2";

/**
 * EarlyAnswerBudget is how many calls a connection may have answered before their request
 * ended, as a token bucket: `burst` at once, `perSecond` after.
 */
export interface EarlyAnswerBudget {
  readonly burst: number;
  readonly perSecond: number;
}

/**
 * defaultEarlyAnswerBudget is half the rapid-reset limit of the nghttp2 in Node's HTTP/2
 * server (1,000 client resets at once, 33 a second after, then GOAWAY(INTERNAL_ERROR); Node 20
 * cannot change it), at the same rate: every early answer may cost one client reset, and the
 * other half is left for the resets the server does not cause (cancelled calls).
 */
const defaultEarlyAnswerBudget: EarlyAnswerBudget = { burst: 500, perSecond: 33 };

/** EarlyAnswers tracks, per HTTP/2 connection, the calls answered before their request ended. */
export interface EarlyAnswers {
  /**
   * Whether a call on `session` that ended before its request must wait for the request's end
   * before it is answered: true once the connection's budget is spent.
   */
  mustWait(session: Http2Session | undefined): boolean;
  /** Records that a call on `session` was answered before its request ended. */
  answered(session: Http2Session | undefined): void;
}

/**
 * createEarlyAnswers returns the per-connection accounting of calls answered before their
 * request ended (refused at the header, or failed part way, while the client still sends).
 *
 * Why: gRPC C-core clients (grpcio, the Python SDK) reset every such call with
 * RST_STREAM(NO_ERROR), and nghttp2 counts every reset against its rapid-reset limit; a client
 * refused over and over (an offload over the size limit, in a loop) lost its connection after
 * ~1,000 refusals, and with it the calls crossing nghttp2's GOAWAY. Answering early is what a
 * single refusal wants (the client stops sending at once); once a connection has spent its
 * budget, its calls are answered when the request ends instead, so that there is nothing to
 * reset. The budget refills at the rate nghttp2's does, so a client refused less often than
 * that is always answered at once. Connections are held weakly: their entries go with them.
 */
export function createEarlyAnswers(
  budget: EarlyAnswerBudget = defaultEarlyAnswerBudget,
  now: () => number = () => performance.now(),
): EarlyAnswers {
  const buckets = new WeakMap<Http2Session, { tokens: number; at: number }>();
  const level = (session: Http2Session) => {
    const t = now();
    const bucket = buckets.get(session) ?? { tokens: budget.burst, at: t };
    bucket.tokens = Math.min(
      budget.burst,
      bucket.tokens + ((t - bucket.at) / 1000) * budget.perSecond,
    );
    bucket.at = t;
    buckets.set(session, bucket);
    return bucket;
  };
  return {
    mustWait: (session) => session !== undefined && level(session).tokens < 1,
    answered(session) {
      if (session === undefined) return;
      const bucket = level(session);
      bucket.tokens = Math.max(0, bucket.tokens - 1);
    },
  };
}
