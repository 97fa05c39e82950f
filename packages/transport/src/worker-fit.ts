// What a worker tells replicas' admission of itself: its settings, its latency fit, the batches it runs now.
import { LatencyModel } from '@microbatch/core';
import type { WorkerSettings } from './batch-tally.js';
import type { WireBatch } from './wire.js';
import { round1 } from './worker-kit.js';

/** The settings a worker announces as they are configured. */
export interface AnnouncedSettings {
  readonly maxBatchSize: number;
  readonly batchWaitTimeoutMs: number;
  readonly concurrency: number;
}

/**
 * A worker's latency bookkeeping, whatever the broker: core's latency model fitted on its batches (items, ms holding
 * the slot) and the batches running now (their items and start, `performance.now()`), announced for admission.
 *
 * @example
 * ```ts
 * const fit = new WorkerFit();
 * fit.start(1, entries.length, performance.now());
 * // ... the batch runs ...
 * fit.add(entries.length, performance.now() - slotStarted);
 * if (fit.end(1)) announce(JSON.stringify(fit.settings({ maxBatchSize, batchWaitTimeoutMs, concurrency })));
 * ```
 */
export class WorkerFit {
  /** Core's latency model, fitted on this worker's batches (items, ms holding the slot): announced for admission. */
  readonly #model = new LatencyModel();
  /** The batches running now: their items and start (`performance.now()`), announced with the fit. */
  readonly #running = new Map<number, { readonly cost: number; readonly startedAt: number }>();

  /** Records a batch that started holding its slot at `startedAt` (`performance.now()`). */
  start(sequence: number, cost: number, startedAt: number): void {
    this.#running.set(sequence, { cost, startedAt });
  }

  /** Forgets a batch that ended; `true` if it was running (its end is worth announcing). */
  end(sequence: number): boolean {
    return this.#running.delete(sequence);
  }

  /** Fits one batch that succeeded: `items` held the slot `ms` (a failed batch says nothing of how long they take). */
  add(items: number, ms: number): void {
    this.#model.add(items, ms);
  }

  /**
   * The settings replicas hear of this worker (see `WorkerSettings`): the configured ones, its fit once it has
   * samples, and its running batches with how long each has run so far.
   */
  settings(configured: AnnouncedSettings): WorkerSettings {
    const { maxBatchSize, batchWaitTimeoutMs, concurrency } = configured;
    const now = performance.now();
    const running = [...this.#running.values()].map(({ cost, startedAt }) => ({
      cost,
      elapsedMs: round1(now - startedAt),
    }));
    const fit = this.#model.fit();
    return { maxBatchSize, batchWaitTimeoutMs, concurrency, ...(fit.samples === 0 ? {} : { fit }), running };
  }
}

/**
 * The batch an entry's replies name: the worker batch `id`, its size and the worker's `maxBatchSize`, the entry's
 * time on the queue (`waits[index]`), and, with an answer, how long the batch ran.
 *
 * @example
 * ```ts
 * const batchOf = wireBatchOf(`${workerId}-${sequence}`, entries.length, maxBatchSize, waits);
 * replyFields(entry.itemId, ReplyKind.START, 'null', batchOf(index));
 * ```
 */
export function wireBatchOf(
  id: string,
  size: number,
  max: number,
  waits: readonly number[],
): (index: number, executionMs?: number) => WireBatch {
  return (index, executionMs) => ({
    id,
    size,
    max,
    queueMs: Math.round(waits[index] ?? 0),
    ...(executionMs === undefined ? {} : { executionMs: round1(executionMs) }),
  });
}
