import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Health,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "../clients/ts/src/gen/grpc/health/v1/health_pb.js";

/** HealthState is the serving status of the server ("") and each named service. */
export interface HealthState {
  /** Sets every known service's status (SERVING on start, NOT_SERVING before a drain). */
  setAll(status: ServingStatus): void;
  /** Ends every Watch stream after it has sent the current status (the server is stopping). */
  endWatches(): void;
  /** The grpc.health.v1.Health implementation backed by this state. */
  readonly service: ServiceImpl<typeof Health>;
}

/**
 * createHealthState serves grpc.health.v1 for the given service names (plus "" for the
 * whole server). Watch streams a status whenever it changes, so load balancers see a drain
 * at once.
 */
export function createHealthState(services: string[]): HealthState {
  const statuses = new Map<string, ServingStatus>(
    ["", ...services].map((name) => [name, ServingStatus.SERVING]),
  );
  const watchers = new Set<() => void>();
  let ended = false;
  const response = (status: ServingStatus): HealthCheckResponse =>
    create(HealthCheckResponseSchema, { status });

  return {
    setAll(status) {
      for (const name of statuses.keys()) statuses.set(name, status);
      for (const notify of watchers) notify();
    },
    endWatches() {
      ended = true;
      for (const notify of watchers) notify();
    },
    service: {
      check(req) {
        const status = statuses.get(req.service);
        if (status === undefined) {
          throw new ConnectError(`unknown service "${req.service}"`, Code.NotFound);
        }
        return response(status);
      },
      list() {
        return {
          statuses: Object.fromEntries([...statuses].map(([name, s]) => [name, response(s)])),
        };
      },
      async *watch(req, ctx) {
        let wake: () => void = () => {};
        const notify = () => wake();
        watchers.add(notify);
        ctx.signal.addEventListener("abort", notify, { once: true });
        try {
          let last: ServingStatus | undefined;
          while (!ctx.signal.aborted) {
            const status = statuses.get(req.service) ?? ServingStatus.SERVICE_UNKNOWN;
            if (status !== last) {
              last = status;
              yield response(status);
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
