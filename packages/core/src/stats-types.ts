import type { ErrorCode } from './errors.js';

/** Why an item was refused or failed, as counted in stats and reported by the `reject` event. */
export type RejectReason = ErrorCode | 'CANCELLED';

/**
 * Why an item was refused with `OVERLOADED`: its predicted wait exceeded `maxLatencyMs` (`latency`), it would
 * miss its deadline (`deadline`, at arrival or later while queued), or its fairness key used up its share of the
 * queue (`fair-share`).
 */
export type OverloadCause = 'latency' | 'deadline' | 'fair-share';

/** The batcher's online estimate of handler time, `msPerCost · cost + msPerBatch`. */
export interface LatencyEstimate {
  /** Whether enough batches have run (5) for admission to use the estimate. */
  readonly ready: boolean;
  /** Batches in the fit (the last 50 at most). */
  readonly samples: number;
  /** Handler milliseconds per unit of batch cost (the slope). */
  readonly msPerCost: number;
  /** Fixed handler milliseconds per batch (the intercept). */
  readonly msPerBatch: number;
}

/** The events a batcher emits, with their payloads. */
export interface BatcherEvents {
  /** A batch was dispatched to the handler. */
  batchStart: {
    readonly batchId: number;
    readonly batchSize: number;
    readonly maxBatchSize: number;
    readonly key: unknown;
    /** Each item's time in the queue, in ms. */
    readonly queueTimesMs: readonly number[];
  };
  /** A handler call finished (or timed out). */
  batchEnd: {
    readonly batchId: number;
    readonly batchSize: number;
    readonly key: unknown;
    readonly executionMs: number;
    /** How many of its items failed. */
    readonly failed: number;
  };
  /** An item was refused, expired, cancelled, or failed. */
  reject: {
    readonly reason: RejectReason;
    readonly error: unknown;
    /** For `OVERLOADED`: which limit refused it. */
    readonly cause?: OverloadCause;
  };
}

/** Running totals since the batcher was created. */
export interface BatcherStats {
  readonly name: string;
  /** Items waiting to be dispatched. */
  readonly queueLength: number;
  /** Handler calls running now. */
  readonly inFlightBatches: number;
  readonly batchesProcessed: number;
  /** Items dispatched to the handler. */
  readonly itemsProcessed: number;
  readonly lastBatchSize: number;
  readonly meanBatchSize: number;
  /** Mean of actual / max batch size over all batches, in percent (Ray Serve's batch utilisation). */
  readonly batchUtilizationPercent: number;
  readonly queueWaitMs: Summary;
  readonly executionMs: Summary;
  readonly succeeded: number;
  /** Items that failed in the handler (thrown, `Error` result, bad result, execution timeout). */
  readonly failed: number;
  /** Items refused or failed, by reason. */
  readonly rejected: Readonly<Record<RejectReason, number>>;
  readonly expired: number;
  readonly cancelled: number;
  /** `OVERLOADED` refusals by cause. */
  readonly overloaded: Readonly<Record<OverloadCause, number>>;
  /** The handler-time estimate behind latency-aware admission. */
  readonly estimate: LatencyEstimate;
  /** The batcher's `maxLatencyMs` (`Infinity` when unset). */
  readonly maxLatencyMs: number;
  /**
   * The predicted milliseconds from now until a new item of cost 1 (no fairness key, priority 0) would have its
   * result, as admission reads it (the slow end of the band the fit's recent error allows), so it exceeds
   * `maxLatencyMs` exactly when such an item would be refused: 0 while idle, `NaN` until the estimate is ready.
   */
  readonly predictedLatencyMs: number;
}

/** Count, sum, mean and max of a series of measurements, in ms. */
export interface Summary {
  readonly count: number;
  readonly sum: number;
  readonly mean: number;
  readonly max: number;
}
