import type { LatencyFit } from './latency-model.js';

/**
 * One live worker of a shared queue, as a web replica's admission reads it: how it forms batches, core's latency
 * fit over its batches, and the batches it runs now (with how long they have run).
 *
 * @example
 * ```ts
 * const worker: FleetWorker = { maxBatchSize: 8, concurrency: 1, fit: undefined, running: [{ cost: 8, elapsedMs: 12 }] };
 * ```
 */
export interface FleetWorker {
  readonly maxBatchSize: number;
  readonly concurrency: number;
  /** Absent until it ran a batch. */
  readonly fit: LatencyFit | undefined;
  readonly running: ReadonlyArray<{ readonly cost: number; readonly elapsedMs: number }>;
}

/**
 * A shared queue's load (a transport's `load()`, e.g. `@microbatch/redis`'s), for latency-aware and fair admission on
 * a web replica (`@microbatch/serving`'s `ReplicaAdmission`): the items queued and not started across every replica,
 * the live workers, and the items in flight (queued or running) of each fairness key across every replica.
 *
 * @example
 * ```ts
 * const { waiting, workers, keys } = queue.load();
 * ```
 */
export interface FleetLoad {
  readonly waiting: number;
  readonly workers: readonly FleetWorker[];
  readonly keys: ReadonlyMap<string, number>;
}
