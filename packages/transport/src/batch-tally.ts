import type { BatcherEvents, BatcherStats, LatencyFit, Summary } from '@microbatch/core';
import type { WireBatch } from './wire.js';

/**
 * What a live worker announces in its heartbeat (and at each batch's start and end): the settings it forms batches
 * with, the latency model fitted on its batches, and the batches it runs (their size, and ms since they started).
 */
export interface WorkerSettings {
  readonly maxBatchSize: number;
  readonly batchWaitTimeoutMs: number;
  readonly concurrency: number;
  /** Core's latency fit over this worker's batches (cost: items per batch); absent before its first batch. */
  readonly fit?: LatencyFit;
  /** The batches running on it when it published: items, and how long they had run (ms). */
  readonly running?: ReadonlyArray<{ readonly cost: number; readonly elapsedMs: number }>;
  /** When it published, on Redis's clock (ms). */
  readonly at?: number;
}

/**
 * The whole queue (every replica's items) as last sampled, once per replica heartbeat: entries waiting for a worker,
 * entries delivered to a worker and not yet answered, the live workers and their settings.
 */
export interface QueueSnapshot {
  readonly waiting: number;
  readonly running: number;
  readonly workersAlive: number;
  readonly workerSettings: readonly WorkerSettings[];
  /** When it was sampled (ms since the epoch); 0 before the first sample. */
  readonly sampledAt: number;
}

export const EMPTY_SNAPSHOT: QueueSnapshot = {
  waiting: 0,
  running: 0,
  workersAlive: 0,
  workerSettings: [],
  sampledAt: 0,
};

/** A running count, sum and max. */
class Series {
  count = 0;
  sum = 0;
  max = 0;

  add(value: number): void {
    this.count += 1;
    this.sum += value;
    this.max = Math.max(this.max, value);
  }

  summary(): Summary {
    return { count: this.count, sum: this.sum, mean: this.count === 0 ? 0 : this.sum / this.count, max: this.max };
  }
}

/** A worker batch that runs some of this batcher's items, until the last of them ends. */
interface LiveBatch {
  remaining: number;
  executionMs: number | undefined;
  /** Its `batchStart` / `batchEnd` (`undefined` once `batchStart` was emitted): this replica's items' waits. */
  queueTimesMs: number[] | undefined;
  readonly event: { readonly batchId: number; readonly batchSize: number; readonly maxBatchSize: number };
  failed: number;
}

/** Where a tally reports the workers' batches as `batchStart` / `batchEnd` events (the batcher's `on`). */
export type BatchEventSink = <E extends 'batchStart' | 'batchEnd'>(event: E, payload: BatcherEvents[E]) => void;

/**
 * One batcher's items as the workers report them: waiting (queued, not started), started in a worker's batch
 * (announced by the worker before it runs the batch), ended. Its batch figures are the workers' batches that ran
 * these items: their whole size (every replica's items), the worker's pull size, the handler's execution time.
 *
 * @example
 * ```ts
 * tally.queued(); tally.start({ id: 'a1-1', size: 8, max: 16, queueMs: 3 }); tally.end('a1-1', 41.5);
 * tally.figures().meanBatchSize; // 8
 * ```
 */
export class BatchTally {
  #waiting = 0;
  #items = 0;
  #batches = 0;
  #lastSize = 0;
  #sizes = 0;
  #utilization = 0;
  readonly #queueWait = new Series();
  readonly #execution = new Series();
  readonly #live = new Map<string, LiveBatch>();
  readonly #emit: BatchEventSink | undefined;
  #sequence = 0;

  /**
   * `emit` gets one `batchStart` per worker batch that ran items of this batcher (its whole size, the worker's
   * pull size, these items' queue waits) and one `batchEnd` when the last of them ends (the execution time the
   * worker reported; none if no answer reported one, as when every item was cancelled). Batch ids are this tally's.
   */
  constructor(emit?: BatchEventSink) {
    this.#emit = emit;
  }

  get waiting(): number {
    return this.#waiting;
  }

  get inFlightBatches(): number {
    return this.#live.size;
  }

  /** An item was added to the stream. */
  queued(): void {
    this.#waiting += 1;
  }

  /** A queued item started in `batch`. */
  start(batch: WireBatch): void {
    this.#waiting -= 1;
    this.#join(batch);
  }

  /** A started item was taken over by another worker's batch (its first worker stopped). */
  move(from: string, batch: WireBatch): void {
    this.end(from, undefined);
    this.#join(batch);
  }

  /** An item ended: never started (`undefined`: cancelled, expired or refused), or in batch `id`. */
  end(id: string | undefined, executionMs: number | undefined, failed = false): void {
    if (id === undefined) {
      this.#waiting -= 1;
      return;
    }
    const batch = this.#live.get(id);
    if (batch === undefined) return;
    if (executionMs !== undefined) batch.executionMs = Math.max(batch.executionMs ?? 0, executionMs);
    if (failed) batch.failed += 1;
    batch.remaining -= 1;
    if (batch.remaining > 0) return;
    this.#live.delete(id);
    if (batch.executionMs !== undefined) this.#execution.add(batch.executionMs);
    this.#announce(batch);
    if (batch.executionMs === undefined || batch.event.batchSize === 0) return;
    const { batchId, batchSize } = batch.event;
    this.#emit?.('batchEnd', {
      batchId,
      batchSize,
      key: undefined,
      executionMs: batch.executionMs,
      failed: batch.failed,
    });
  }

  /** Emits a batch's `batchStart` once, with the waits of this batcher's items that joined it so far. */
  #announce(batch: LiveBatch): void {
    const queueTimesMs = batch.queueTimesMs;
    if (queueTimesMs === undefined) return;
    batch.queueTimesMs = undefined;
    if (batch.event.batchSize === 0) return; // a worker's refusal, not a handler call
    this.#emit?.('batchStart', { ...batch.event, key: undefined, queueTimesMs });
  }

  #join(batch: WireBatch): void {
    this.#items += 1;
    this.#queueWait.add(batch.queueMs);
    const live = this.#live.get(batch.id);
    if (live !== undefined) {
      live.remaining += 1;
      live.queueTimesMs?.push(batch.queueMs);
      return;
    }
    const created: LiveBatch = {
      remaining: 1,
      executionMs: undefined,
      queueTimesMs: [batch.queueMs],
      event: { batchId: ++this.#sequence, batchSize: batch.size, maxBatchSize: Math.max(batch.max, batch.size) },
      failed: 0,
    };
    this.#live.set(batch.id, created);
    // A worker sends the start notices of one batch together: they arrive in one read, so `batchStart` waits for
    // the rest of this read to gather the waits of every item of this batcher in it.
    if (this.#emit !== undefined) queueMicrotask(() => this.#announce(created));
    this.#batches += 1;
    this.#lastSize = batch.size;
    this.#sizes += batch.size;
    if (batch.max > 0) this.#utilization += Math.min(1, batch.size / batch.max);
  }

  figures(): Pick<
    BatcherStats,
    | 'queueLength'
    | 'inFlightBatches'
    | 'batchesProcessed'
    | 'itemsProcessed'
    | 'lastBatchSize'
    | 'meanBatchSize'
    | 'batchUtilizationPercent'
    | 'queueWaitMs'
    | 'executionMs'
  > {
    const batches = this.#batches;
    return {
      queueLength: this.#waiting,
      inFlightBatches: this.#live.size,
      batchesProcessed: batches,
      itemsProcessed: this.#items,
      lastBatchSize: this.#lastSize,
      meanBatchSize: batches === 0 ? 0 : this.#sizes / batches,
      batchUtilizationPercent: batches === 0 ? 0 : (100 * this.#utilization) / batches,
      queueWaitMs: this.#queueWait.summary(),
      executionMs: this.#execution.summary(),
    };
  }
}
