import type { BatchTracer } from './tracing.js';

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
   * The dispatch policy. `0` (the default) is work-conserving: whenever a handler slot is free and items are
   * queued, they go at once (calls made in the same synchronous burst still share one batch, collected without a
   * timer); while every slot is busy, arrivals gather into the next batch, formed when a slot frees. A value > 0
   * holds a batch's first item up to that long for others to join, even when a slot is idle: it pays only when a
   * handler call has a large fixed cost and requests arrive a few milliseconds apart at low load (for example a
   * remote model billed per call); it costs every quiet-hour request that wait.
   * @default 0
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
   * Latency-aware admission: the longest an item may be predicted to take from its call to its result. The batcher
   * fits handler time as `a·cost + b` by least squares over its recent batches (the last 50), predicts each
   * arriving item's completion (the work queued ahead of it, the running batches, its own batch) and refuses it at
   * once with `OVERLOADED` (HTTP 503, `Retry-After` from the estimate) when the prediction exceeds this limit or
   * the item's deadline. Until 5 batches have run, only `maxQueueSize` applies. A call may lower it.
   * @default Infinity (no latency limit; deadlines still refuse what cannot meet them once the estimate is ready)
   */
  readonly maxLatencyMs?: number;
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
   * The cost of one input (for example prompt + `max_tokens` tokens); a batch's total never exceeds `maxBatchCost`,
   * and admission weighs the queued work by it (the latency estimate is per unit of cost). A throw rejects only
   * that call.
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
   * The `Retry-After` hint, in seconds, carried by `CLOSED` errors, and by `QUEUE_FULL` until the latency estimate
   * is ready (afterwards `QUEUE_FULL` and `OVERLOADED` carry the predicted time for the backlog to drain).
   * @default 1
   */
  readonly retryAfterSeconds?: number;
  /**
   * Time source and timers (tests inject a fake one).
   * @default performance.now() and the global timers
   */
  readonly clock?: Clock;
  /**
   * Traces each batch: `otelTracer()` from `@microbatch/core/otel` makes every batch an OpenTelemetry span linked
   * to the spans of the calls it served, `diagnosticsTracer()` from `@microbatch/core/diagnostics` publishes
   * `diagnostics_channel` tracing channels; `combineTracers` runs both.
   * @default none (no tracing work at all)
   */
  readonly tracer?: BatchTracer;
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
  /** This call's latency limit in ms (see the batcher's `maxLatencyMs`); it may only lower the batcher's. */
  readonly maxLatencyMs?: number;
  /**
   * Who the call is for (a user, an API key, a client address). Each active key gets a fair share of the
   * admissible work and of each batch: batches take items from the keys in turn (by cost), and an item's predicted
   * wait counts only the work of other keys that would run before it, so one key's burst is refused before
   * another key's request. Calls without a key share one anonymous key.
   */
  readonly fairnessKey?: string | number;
  /** Called once, synchronously, when the item's batch is dispatched (before the handler runs). */
  readonly onDispatch?: (info: DispatchInfo) => void;
}

/** Facts about the batch an item joined, given to `onDispatch`. */
export interface DispatchInfo {
  /**
   * The batch's id: a number from the engine; a transport may give a global id (`@microbatch/redis`:
   * `worker-3f2a:17`), so `X-Batch-Id` shows two replicas' requests sharing one worker batch.
   */
  readonly batchId: number | string;
  readonly batchSize: number;
  /** Milliseconds the item waited in the queue. */
  readonly queueTimeMs: number;
  readonly key: unknown;
}
