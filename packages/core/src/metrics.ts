import type { BatcherEvents, BatcherStats, LatencyEstimate, OverloadCause, RejectReason, Summary } from './types.js';
import { ErrorCode } from './errors.js';

type Listener<E extends keyof BatcherEvents> = (payload: BatcherEvents[E]) => void;

/** A typed event emitter that never lets a listener's throw break the batcher. */
export class Emitter {
  // Keyed loosely on purpose: `on` and `emit` restore the per-event types.
  readonly #listeners = new Map<keyof BatcherEvents, Set<(payload: never) => void>>();

  on<E extends keyof BatcherEvents>(event: E, listener: Listener<E>): () => void {
    if (typeof listener !== 'function')
      throw new TypeError(`Expected \`listener\` to be a function, got ${typeof listener}`);
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  has(event: keyof BatcherEvents): boolean {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }

  emit<E extends keyof BatcherEvents>(event: E, payload: BatcherEvents[E]): void {
    const set = this.#listeners.get(event) as Set<Listener<E>> | undefined;
    if (set === undefined) return;
    for (const listener of set) {
      try {
        listener(payload);
      } catch (error) {
        // Like EventTarget: report the listener's bug without corrupting the batcher's state mid-update.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

class RunningSummary {
  count = 0;
  sum = 0;
  max = 0;

  add(value: number): void {
    this.count += 1;
    this.sum += value;
    if (value > this.max) this.max = value;
  }

  /** `count` values at once, of total `sum` and largest `max`. */
  addMany(count: number, sum: number, max: number): void {
    this.count += count;
    this.sum += sum;
    if (max > this.max) this.max = max;
  }

  snapshot(): Summary {
    return { count: this.count, sum: this.sum, mean: this.count === 0 ? 0 : this.sum / this.count, max: this.max };
  }
}

const REASONS: readonly RejectReason[] = [...Object.values(ErrorCode), 'CANCELLED'];

/** Running totals behind `stats()`. */
export class StatsRecorder {
  readonly queueWait = new RunningSummary();
  readonly execution = new RunningSummary();
  batches = 0;
  items = 0;
  lastBatchSize = 0;
  utilizationSum = 0;
  succeeded = 0;
  failed = 0;
  readonly rejected = Object.fromEntries(REASONS.map((reason) => [reason, 0])) as Record<RejectReason, number>;
  readonly overloaded: Record<OverloadCause, number> = { latency: 0, deadline: 0, 'fair-share': 0 };

  recordBatch(size: number, maxBatchSize: number): void {
    this.batches += 1;
    this.items += size;
    this.lastBatchSize = size;
    this.utilizationSum += size / maxBatchSize;
  }

  snapshot(
    name: string,
    queueLength: number,
    inFlightBatches: number,
    estimate: LatencyEstimate,
    maxLatencyMs: number,
    predictedLatencyMs: number,
  ): BatcherStats {
    return {
      name,
      queueLength,
      inFlightBatches,
      batchesProcessed: this.batches,
      itemsProcessed: this.items,
      lastBatchSize: this.lastBatchSize,
      meanBatchSize: this.batches === 0 ? 0 : this.items / this.batches,
      batchUtilizationPercent: this.batches === 0 ? 0 : (100 * this.utilizationSum) / this.batches,
      queueWaitMs: this.queueWait.snapshot(),
      executionMs: this.execution.snapshot(),
      succeeded: this.succeeded,
      failed: this.failed,
      rejected: { ...this.rejected },
      expired: this.rejected.DEADLINE_EXCEEDED,
      cancelled: this.rejected.CANCELLED,
      overloaded: { ...this.overloaded },
      estimate,
      maxLatencyMs,
      predictedLatencyMs,
    };
  }
}
