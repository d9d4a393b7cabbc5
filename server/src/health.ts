import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Health,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";

/**
 * HealthState is the serving status of the server ("") and each named service. Every service
 * has the same status: NOT_SERVING while any reason is set (the server is draining, the store
 * is unusable), SERVING otherwise, so a poller of "" and one of "spillway.v1.SpillwayService"
 * always agree.
 */
export interface HealthState {
  /**
   * Sets (`true`) or clears (`false`) one reason the server should get no traffic, such as
   * `"draining"` or `"store"`; watchers are told when the status changes.
   */
  setUnready(reason: string, unready: boolean): void;
  /** The status every service reports now. */
  status(): ServingStatus;
  /** Ends every Watch stream after it has sent the current status (the server is stopping). */
  endWatches(): void;
  /** The grpc.health.v1.Health implementation backed by this state. */
  readonly service: ServiceImpl<typeof Health>;
}

/**
 * The most Watch streams a server process keeps open: a Watch needs no token and lasts, and
 * each holds about 20 KB, so without a bound anyone who can connect could fill the heap
 * (240,000 took a worker to 4.7 GB). Load balancers watch with a stream or a few each.
 */
export const DEFAULT_MAX_HEALTH_WATCHES = 1000;

/** HealthOptions tune createHealthState. */
export interface HealthOptions {
  /** The most Watch streams open at once; more are RESOURCE_EXHAUSTED. */
  readonly maxWatches?: number;
}

/**
 * createHealthState serves grpc.health.v1 for the given service names (plus "" for the
 * whole server). Watch streams a status whenever it changes, so load balancers see a drain
 * at once; at most `maxWatches` (DEFAULT_MAX_HEALTH_WATCHES) at a time, a Watch over that
 * being refused RESOURCE_EXHAUSTED (Check and List are never refused for it).
 */
export function createHealthState(services: string[], opts: HealthOptions = {}): HealthState {
  const maxWatches = opts.maxWatches ?? DEFAULT_MAX_HEALTH_WATCHES;
  const names = new Set(["", ...services]);
  const reasons = new Set<string>();
  const status = (): ServingStatus =>
    reasons.size === 0 ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  const watchers = new Set<() => void>();
  let ended = false;
  const response = (status: ServingStatus): HealthCheckResponse =>
    create(HealthCheckResponseSchema, { status });

  return {
    setUnready(reason, unready) {
      const before = status();
      if (unready) reasons.add(reason);
      else reasons.delete(reason);
      if (status() !== before) for (const notify of watchers) notify();
    },
    status,
    endWatches() {
      ended = true;
      for (const notify of watchers) notify();
    },
    service: {
      check(req) {
        if (!names.has(req.service)) {
          throw new ConnectError(`unknown service "${req.service}"`, Code.NotFound);
        }
        return response(status());
      },
      list() {
        return {
          statuses: Object.fromEntries([...names].map((name) => [name, response(status())])),
        };
      },
      async *watch(req, ctx) {
        if (watchers.size >= maxWatches) {
          throw new ConnectError(
            `${maxWatches} health Watch streams are open on this server process, the most it keeps; call Check instead`,
            Code.ResourceExhausted,
          );
        }
        let wake: () => void = () => {};
        const notify = () => wake();
        watchers.add(notify);
        ctx.signal.addEventListener("abort", notify, { once: true });
        try {
          let last: ServingStatus | undefined;
          while (!ctx.signal.aborted) {
            const now = names.has(req.service) ? status() : ServingStatus.SERVICE_UNKNOWN;
            if (now !== last) {
              last = now;
              yield response(now);
              // The status may have changed while the consumer took this one: look again.
              continue;
            }
            if (ended) return;
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
          }
        } finally {
          watchers.delete(notify);
          ctx.signal.removeEventListener("abort", notify);
        }
      },
    },
  };
}
