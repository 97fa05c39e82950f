import type { ErrorCode } from './errors.js';

/** What a batch handler receives besides its inputs. */
export interface BatchContext {
  /**
   * Aborts when the handler's work is no longer wanted: every item of the batch was cancelled or timed out, the
   * batch passed `executionTimeoutMs`, or the batcher was force-closed. Pass it on to the model call.
   */
  readonly signal: AbortSignal;
  /** The batch's id, unique per batcher, increasing from 1. */
  readonly batchId: number;
  /** The `batchKey` shared by every input of this batch (`undefined` without `batchKey`). */
  readonly key: unknown;
}

/**
 * A batch handler: N inputs in, N results out, in the same order. An `Error` in the result rejects only its item;
 * a throw rejects the whole batch.
 */
export type BatchHandler<I, O> = (
  inputs: I[],
  context: BatchContext,
) => ReadonlyArray<O | Error> | PromiseLike<ReadonlyArray<O | Error>>;

/** The type of {@link END}. */
export interface StreamEnd {
  readonly microbatch: 'end';
}
/** The type of {@link SKIP}. */
export interface StreamSkip {
  readonly microbatch: 'skip';
}

// Markers are frozen objects rather than symbols: a `unique symbol` widens to `symbol` inside `inputs.map(...)`,
// which would spoil the inference of the handler's value type.
/**
 * A slot of a streaming step that ends its item's stream.
 *
 * @example
 * ```ts
 * yield prompts.map((prompt, i) => (finished[i] ? END : nextToken[i]));
 * ```
 */
export const END: StreamEnd = Object.freeze({ microbatch: 'end' });
/**
 * A slot of a streaming step that carries nothing for its item this step.
 *
 * @example
 * ```ts
 * yield prompts.map((prompt, i) => (produced[i] ? piece[i] : SKIP));
 * ```
 */
export const SKIP: StreamSkip = Object.freeze({ microbatch: 'skip' });

/** One slot of a streaming step: a value, an `Error` (fails that item's stream), {@link END} or {@link SKIP}. */
export type StreamSlot<O> = O | Error | StreamEnd | StreamSkip;

/**
 * A streaming batch handler: yields steps, each an array with one slot per input. When it returns, every stream
 * that has not ended ends.
 */
export type StreamingBatchHandler<I, O> = (
  inputs: I[],
  context: BatchContext,
) => AsyncIterable<ReadonlyArray<StreamSlot<O>>>;

/** Times and timers, injectable so tests can drive the batcher deterministically. */
export interface Clock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** What to do with a batch whose handler throws. */
export type OnBatchError = 'fail-batch' | 'isolate';

/** Options of {@link createBatcher}; every one is validated once, when the batcher is created. */
export interface BatcherOptions<I> {
  /**
   * A name for logs and metrics labels.
   * @default 'default'
   */
  readonly name?: string;
  /**
   * The most inputs one handler call receives.
   * @default 8
   */
  readonly maxBatchSize?: number;
  /**
   * How long the first item of a batch waits for others before the batch is dispatched anyway. Non-zero by
   * default: with 0, requests that arrive a few event-loop turns apart would never meet.
   * @default 5
   */
  readonly batchWaitTimeoutMs?: number;
  /**
   * How many handler calls may run at once. While all are busy, arriving items gather into the next batch.
   * @default 1
   */
  readonly maxConcurrentBatches?: number;
  /**
   * The most items waiting (not yet dispatched); one more is refused at once with `QUEUE_FULL`.
   * @default 1024
   */
  readonly maxQueueSize?: number;
  /**
   * Each item's deadline, from the call: queued past it, the item is removed (`DEADLINE_EXCEEDED`) and never
   * reaches the handler; running past it, its promise rejects and its result is discarded. A call may lower it.
   * @default Infinity
   */
  readonly timeoutMs?: number;
  /**
   * The longest one handler call may run: past it, its items reject with `EXECUTION_TIMEOUT`, the handler's
   * signal aborts and its concurrency slot is freed.
   * @default Infinity
   */
  readonly executionTimeoutMs?: number;
  /**
   * Partitions inputs: only inputs with equal keys (`Object.is`) share a batch. A throw rejects only that call.
   * @default () => undefined
   */
  readonly batchKey?: (input: I) => unknown;
  /**
   * The cost of one input (for example its token count); a batch's total never exceeds `maxBatchCost`.
   * A throw rejects only that call.
   * @default () => 1
   */
  readonly cost?: (input: I) => number;
  /**
   * The most total `cost` one batch may hold; an input costing more on its own rejects with `ITEM_TOO_LARGE`.
   * @default Infinity
   */
  readonly maxBatchCost?: number;
  /**
   * `'fail-batch'` rejects every item of a batch whose handler throws. `'isolate'` re-runs it by halves so only
   * the offending items fail; it costs extra handler calls, so it is opt-in.
   * @default 'fail-batch'
   */
  readonly onBatchError?: OnBatchError;
  /**
   * The `Retry-After` hint, in seconds, carried by `QUEUE_FULL` and `CLOSED` errors.
   * @default 1
   */
  readonly retryAfterSeconds?: number;
  /**
   * Time source and timers (tests inject a fake one).
   * @default performance.now() and the global timers
   */
  readonly clock?: Clock;
}

/** Options of one call. */
export interface CallOptions {
  /** Cancels the call: queued, it is removed; running, its promise rejects with `signal.reason`. */
  readonly signal?: AbortSignal;
  /** This call's deadline in ms; it may only lower the batcher's `timeoutMs`. */
  readonly timeoutMs?: number;
  /**
   * Higher runs first within a batch key; equal priorities run in arrival order.
   * @default 0
   */
  readonly priority?: number;
  /** Called once, synchronously, when the item's batch is dispatched (before the handler runs). */
  readonly onDispatch?: (info: DispatchInfo) => void;
}

/** Facts about the batch an item joined, given to `onDispatch`. */
export interface DispatchInfo {
  readonly batchId: number;
  readonly batchSize: number;
  /** Milliseconds the item waited in the queue. */
  readonly queueTimeMs: number;
  readonly key: unknown;
}

/** Why an item was refused or failed, as counted in stats and reported by the `reject` event. */
export type RejectReason = ErrorCode | 'CANCELLED';

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
  reject: { readonly reason: RejectReason; readonly error: unknown };
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
}

/** Count, sum, mean and max of a series of measurements, in ms. */
export interface Summary {
  readonly count: number;
  readonly sum: number;
  readonly mean: number;
  readonly max: number;
}

/** Options of `close()`. */
export interface CloseOptions {
  /** Reject queued items with `CLOSED` instead of running them. Running batches still finish. */
  readonly force?: boolean;
}

/** What every batcher has, streaming or not. */
export interface BatcherBase {
  readonly name: string;
  /** Whether the handler streams (then use `stream()`). */
  readonly streaming: boolean;
  /** Effective from the next batch. */
  maxBatchSize: number;
  /** Effective from the next batch. */
  batchWaitTimeoutMs: number;
  /** Effective from the next dispatch. */
  maxConcurrentBatches: number;
  /** Items waiting to be dispatched. */
  readonly queueLength: number;
  /** Handler calls running now. */
  readonly inFlightBatches: number;
  /** True once `close()` was called. */
  readonly closed: boolean;
  stats(): BatcherStats;
  /** Subscribes to an event; returns the function that unsubscribes. */
  on<E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void): () => void;
  /** Stops accepting work (`CLOSED`); resolves once queued and running work has finished. */
  close(options?: CloseOptions): Promise<void>;
}

/**
 * A batcher: call it with ONE input, get ONE result; concurrent calls share one handler call.
 */
export interface Batcher<I, O> extends BatcherBase {
  (input: I, options?: CallOptions): Promise<O>;
  readonly streaming: false;
  call(input: I, options?: CallOptions): Promise<O>;
}

/**
 * A batcher whose handler streams: `stream()` gives each caller its own values as they are produced.
 */
export interface StreamingBatcher<I, O> extends BatcherBase {
  /** Collects the item's whole stream into an array. */
  (input: I, options?: CallOptions): Promise<O[]>;
  readonly streaming: true;
  /** Collects the item's whole stream into an array. */
  call(input: I, options?: CallOptions): Promise<O[]>;
  /** The item's values as they are produced; `break` or `return()` cancels the item. */
  stream(input: I, options?: CallOptions): AsyncIterableIterator<O>;
}
