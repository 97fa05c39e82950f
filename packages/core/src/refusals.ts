import { BatchError, ErrorCode } from './errors.js';
import type { ResolvedOptions } from './options.js';
import type { Predictor } from './predictor.js';
import type { OverloadCause, RejectReason } from './types.js';

/** Why an item is not admitted, or leaves the queue without running: what its caller and the stats are told. */
export class Refusal {
  readonly admitted = false;
  readonly error: unknown;
  readonly reason: RejectReason;
  readonly cause: OverloadCause | undefined;

  constructor(error: unknown, reason: RejectReason, cause?: OverloadCause) {
    this.error = error;
    this.reason = reason;
    this.cause = cause;
  }
}

/** The decision for an admitted item: one shared value, so admitting allocates nothing. */
export const ADMITTED: { readonly admitted: true } = Object.freeze({ admitted: true });

/** What admission decides for an arriving item (or group): {@link ADMITTED}, or a {@link Refusal} saying why not. */
export type Decision = typeof ADMITTED | Refusal;

/**
 * Builds the refusals the batcher itself decides (closed, queue full, overloaded, a group too large), with the
 * `Retry-After` the predictor gives once its estimate is ready.
 */
export class Refusals {
  readonly #options: ResolvedOptions<unknown>;
  readonly #predictor: Predictor;

  constructor(options: ResolvedOptions<unknown>, predictor: Predictor) {
    this.#options = options;
    this.#predictor = predictor;
  }

  closed(): Refusal {
    const error = new BatchError(ErrorCode.CLOSED, `Batcher "${this.#options.name}" is closed`, {
      retryAfterSeconds: this.#options.retryAfterSeconds,
    });
    return new Refusal(error, ErrorCode.CLOSED);
  }

  queueFull(now: number): Refusal {
    const { name, maxQueueSize } = this.#options;
    const error = new BatchError(
      ErrorCode.QUEUE_FULL,
      `Batcher "${name}" queue is full (maxQueueSize = ${maxQueueSize})`,
      { retryAfterSeconds: this.#backlogRetryAfter(now) },
    );
    return new Refusal(error, ErrorCode.QUEUE_FULL);
  }

  /** A group that no queue of this size could ever hold: retrying cannot help, so it is not `QUEUE_FULL`. */
  groupTooLarge(count: number): Refusal {
    const { name, maxQueueSize } = this.#options;
    const error = new BatchError(
      ErrorCode.ITEM_TOO_LARGE,
      `Batcher "${name}" cannot queue ${count} calls at once (maxQueueSize = ${maxQueueSize})`,
      { details: { calls: count, maxQueueSize } },
    );
    return new Refusal(error, ErrorCode.ITEM_TOO_LARGE);
  }

  /**
   * `OVERLOADED`: what was predicted against which limit (for `fair-share`: the items its key has queued against its
   * share), and when to retry.
   */
  overloaded(cause: OverloadCause, predictedMs: number, limitMs: number): Refusal {
    const predicted = Math.ceil(predictedMs);
    const what =
      cause === 'fair-share'
        ? `this client's share of the queue is used up (${predicted} items queued for it, share ${Math.floor(limitMs)})`
        : `the predicted wait of ${predicted} ms exceeds ${cause === 'deadline' ? 'the deadline' : 'maxLatencyMs'} (${Math.floor(limitMs)} ms)`;
    const error = new BatchError(ErrorCode.OVERLOADED, `Batcher "${this.#options.name}" is overloaded: ${what}`, {
      // By then the backlog ahead has drained enough for the same request to fit (if no one else came meanwhile).
      retryAfterSeconds: cause === 'fair-share' ? this.#backlogRetryAfter() : retryAfter(predictedMs, limitMs),
      details:
        cause === 'fair-share'
          ? { cause, queued: predicted, share: Math.floor(limitMs) }
          : { cause, predictedMs: predicted, limitMs: Math.floor(limitMs) },
    });
    return new Refusal(error, ErrorCode.OVERLOADED, cause);
  }

  /** Once the estimate is ready, how long the queue takes to drain; before, the configured constant. */
  #backlogRetryAfter(now = this.#options.clock.now()): number {
    if (!this.#predictor.ready) return this.#options.retryAfterSeconds;
    return retryAfter(this.#predictor.backlogMs(now), 0);
  }
}

/** `Retry-After` in seconds for a wait predicted at `predictedMs` against `limitMs`: when it would fit. */
function retryAfter(predictedMs: number, limitMs: number): number {
  // Less a microsecond: floating-point noise in the fit must not add a whole second.
  return Math.max(1, Math.ceil((predictedMs - limitMs - 0.001) / 1000));
}
