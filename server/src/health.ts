import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Health,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@spillway/proto/grpc/health/v1/health_pb.js";
import { peerKey } from "./peer-key.js";

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
  /** The most Watch streams open at once (DEFAULT_MAX_HEALTH_WATCHES). */
  readonly maxWatches?: number;
}

/** One open Watch stream: the peer it came from, and how to end it to make room. */
interface Watcher {
  readonly peer: string;
  readonly notify: () => void;
  evicted: boolean;
}

/**
 * createHealthState serves grpc.health.v1 for the given service names (plus "" for the
 * whole server). Watch streams a status whenever it changes, so load balancers see a drain
 * at once. At most `maxWatches` (DEFAULT_MAX_HEALTH_WATCHES) are open at a time, shared fairly
 * among peers (peerKey): when they are all taken, a Watch from a peer holding fewer than the
 * peer holding the most, less one, ends one of that peer's newest (RESOURCE_EXHAUSTED) and takes
 * its place; any other is refused RESOURCE_EXHAUSTED. So one peer, however many streams it
 * opens, cannot keep a load balancer from watching. Check and List are never refused for it.
 */
export function createHealthState(services: string[], opts: HealthOptions = {}): HealthState {
  const maxWatches = opts.maxWatches ?? DEFAULT_MAX_HEALTH_WATCHES;
  const names = new Set(["", ...services]);
  const reasons = new Set<string>();
  const status = (): ServingStatus =>
    reasons.size === 0 ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  const watchers = new Set<Watcher>();
  const byPeer = new Map<string, Watcher[]>();
  /** Ends the newest Watch of the peer holding the most, if it holds more than `peer` would. */
  const makeRoomFor = (peer: string): boolean => {
    let most: Watcher[] = [];
    for (const held of byPeer.values()) if (held.length > most.length) most = held;
    if (most.length <= (byPeer.get(peer)?.length ?? 0) + 1) return false;
    const victim = most[most.length - 1] as Watcher;
    forget(victim);
    victim.evicted = true;
    victim.notify();
    return true;
  };
  const forget = (watcher: Watcher) => {
    if (!watchers.delete(watcher)) return;
    const held = byPeer.get(watcher.peer) ?? [];
    held.splice(held.indexOf(watcher), 1);
    if (held.length === 0) byPeer.delete(watcher.peer);
  };
  let ended = false;
  const response = (status: ServingStatus): HealthCheckResponse =>
    create(HealthCheckResponseSchema, { status });

  return {
    setUnready(reason, unready) {
      const before = status();
      if (unready) reasons.add(reason);
      else reasons.delete(reason);
      if (status() !== before) for (const { notify } of watchers) notify();
    },
    status,
    endWatches() {
      ended = true;
      for (const { notify } of watchers) notify();
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
        const peer = ctx.values.get(peerKey);
        if (watchers.size >= maxWatches && !makeRoomFor(peer)) {
          throw new ConnectError(
            `${maxWatches} health Watch streams are open on this server process, the most it keeps, and this peer holds as many as any other; call Check instead`,
            Code.ResourceExhausted,
          );
        }
        let wake: () => void = () => {};
        const watcher: Watcher = { peer, notify: () => wake(), evicted: false };
        watchers.add(watcher);
        const held = byPeer.get(peer);
        if (held === undefined) byPeer.set(peer, [watcher]);
        else held.push(watcher);
        ctx.signal.addEventListener("abort", watcher.notify, { once: true });
        try {
          let last: ServingStatus | undefined;
          while (!ctx.signal.aborted) {
            if (watcher.evicted) {
              throw new ConnectError(
                `ended to make room for another peer's health Watch: ${maxWatches} are open on this server process, the most it keeps, and this peer holds the most`,
                Code.ResourceExhausted,
              );
            }
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
          forget(watcher);
          ctx.signal.removeEventListener("abort", watcher.notify);
        }
      },
    },
  };
}
