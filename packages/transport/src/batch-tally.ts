import type { BatcherStats, Summary } from '@microbatch/core';
import type { WireBatch } from './wire.js';

/** What a live worker announces in its heartbeat: the settings it forms batches with. */
export interface WorkerSettings {
  readonly maxBatchSize: number;
  readonly batchWaitTimeoutMs: number;
  readonly concurrency: number;
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
}

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
  end(id: string | undefined, executionMs: number | undefined): void {
    if (id === undefined) {
      this.#waiting -= 1;
      return;
    }
    const batch = this.#live.get(id);
    if (batch === undefined) return;
    if (executionMs !== undefined) batch.executionMs = Math.max(batch.executionMs ?? 0, executionMs);
    batch.remaining -= 1;
    if (batch.remaining > 0) return;
    this.#live.delete(id);
    if (batch.executionMs !== undefined) this.#execution.add(batch.executionMs);
  }

  #join(batch: WireBatch): void {
    this.#items += 1;
    this.#queueWait.add(batch.queueMs);
    const live = this.#live.get(batch.id);
    if (live !== undefined) {
      live.remaining += 1;
      return;
    }
    this.#live.set(batch.id, { remaining: 1, executionMs: undefined });
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
