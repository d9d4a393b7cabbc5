import cluster, { type Worker } from "node:cluster";
import {
  AggregatorRegistry,
  type MetricObjectWithValues,
  type MetricValue,
  type Registry,
} from "prom-client";
import { LISTENING_MESSAGE } from "./serve-workers.js";

/** One registry's metrics as `getMetricsAsJSON` gives them. */
type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

const requestType = "spillway:metrics-request";
const answerType = "spillway:metrics-answer";

interface MetricsRequest {
  readonly type: typeof requestType;
  readonly id: number;
}

interface MetricsAnswer {
  readonly type: typeof answerType;
  readonly id: number;
  readonly metrics: Snapshot;
}

/** Whether an IPC message is one of this module's, of `type`. */
function isMessage<M extends { readonly type: string }>(
  message: unknown,
  type: M["type"],
): message is M {
  return (
    typeof message === "object" && message !== null && (message as { type?: unknown }).type === type
  );
}

/**
 * answerMetricsRequests makes this worker answer its primary's scrapes with `registry`'s
 * metrics. Call it before the worker reports that it listens: the primary asks only workers
 * that have.
 */
export function answerMetricsRequests(registry: Registry): void {
  process.on("message", (message: unknown) => {
    if (!isMessage<MetricsRequest>(message, requestType)) return;
    void registry.getMetricsAsJSON().then(
      (metrics) => process.send?.({ type: answerType, id: message.id, metrics }),
      // No answer: the primary counts this worker with its last metrics once the wait is over.
      () => {},
    );
  });
}

/** WorkersMetrics is what the primary of several workers serves at `/metrics`. */
export interface WorkersMetrics {
  /** The exposition format's content type. */
  readonly contentType: string;
  /**
   * The metrics of every worker combined (summed, or as each metric's aggregator says) with
   * the primary's own. Counters and histograms never go down between two scrapes: a worker
   * that exited leaves its last reported counts behind, and one that has not answered within
   * the wait is counted with its last answer. A worker still starting is not asked.
   */
  metrics(): Promise<string>;
}

/** A scrape waiting for its answers. */
interface Pending {
  readonly waiting: Set<Worker>;
  finish(): void;
}

/** How long a scrape waits for a worker's answer before it uses the worker's last one. */
const defaultWaitMs = 2_000;

/**
 * createWorkersMetrics collects the metrics of the cluster's workers for the primary's
 * scrape endpoint. Each scrape asks every worker that has reported listening (the message
 * superviseWorkers hears) and waits up to `waitMs` (2 s) for the answers: a worker that is
 * starting, exiting or busy does not fail the scrape, as prom-client's own aggregation did (a
 * 500 after 5 s for a scrape during a restart), and a restarted worker does not make summed
 * counters drop, which Prometheus would read as a reset of the whole fleet's counts.
 */
export function createWorkersMetrics(opts: {
  readonly own: Registry;
  readonly waitMs?: number;
}): WorkersMetrics {
  const waitMs = opts.waitMs ?? defaultWaitMs;
  const ready = new Set<Worker>();
  const last = new Map<Worker, { readonly id: number; readonly metrics: Snapshot }>();
  const pending = new Map<number, Pending>();
  /** The counters and histograms of workers that exited, summed. */
  let retired: Snapshot = [];
  let nextId = 0;

  cluster.on("message", (worker: Worker, message: unknown) => {
    if (message === LISTENING_MESSAGE) {
      ready.add(worker);
      return;
    }
    // An answer that comes after its worker's exit would count that worker twice: its last
    // counts are in the retired sum already.
    if (!isMessage<MetricsAnswer>(message, answerType) || worker.isDead()) return;
    // Answers to an older scrape may come after a newer one's: keep the newest.
    if ((last.get(worker)?.id ?? -1) < message.id) {
      last.set(worker, { id: message.id, metrics: message.metrics });
    }
    const scrape = pending.get(message.id);
    if (scrape?.waiting.delete(worker) && scrape.waiting.size === 0) scrape.finish();
  });
  cluster.on("exit", (worker: Worker) => {
    ready.delete(worker);
    const gone = last.get(worker);
    last.delete(worker);
    if (gone !== undefined) retired = summedCounts([retired, gone.metrics]);
    for (const scrape of pending.values()) {
      if (scrape.waiting.delete(worker) && scrape.waiting.size === 0) scrape.finish();
    }
  });

  return {
    contentType: opts.own.contentType,
    async metrics() {
      const id = nextId++;
      const asked = [...ready].filter((worker) => worker.isConnected());
      await new Promise<void>((resolve) => {
        const waiting = new Set(asked);
        const timer = setTimeout(() => finish(), waitMs);
        const finish = () => {
          clearTimeout(timer);
          pending.delete(id);
          resolve();
        };
        pending.set(id, { waiting, finish });
        for (const worker of asked) {
          // A worker whose channel closed since is counted by its exit.
          worker.send({ type: requestType, id } satisfies MetricsRequest, (err) => {
            if (err !== null && waiting.delete(worker) && waiting.size === 0) finish();
          });
        }
        if (waiting.size === 0) finish();
      });
      const workers = [...last.values()].map((answer) => answer.metrics);
      const own = (await opts.own.getMetricsAsJSON()) as Snapshot;
      return AggregatorRegistry.aggregate([retired, ...workers, own]).metrics();
    },
  };
}

/** The counters and histograms of the snapshots, each summed by its labels; gauges dropped. */
function summedCounts(snapshots: readonly Snapshot[]): Snapshot {
  const counts = snapshots.map((snapshot) =>
    snapshot
      // prom-client's types declare a numeric enum; at run time the type is its name.
      .filter((metric) => ["counter", "histogram"].includes(metric.type as unknown as string))
      .map((metric) => ({ ...metric, aggregator: "sum" as const })),
  );
  const registry = AggregatorRegistry.aggregate(counts);
  return registry
    .getMetricsAsArray()
    .map((metric) => (metric as unknown as { get(): Snapshot[number] }).get());
}
