import type { BatcherEvents, BatcherStats } from './stats-types.js';
import type { CallOptions } from './option-types.js';

// `Clock` lives with the option that takes it, so the option types import nothing back from here.
export type { BatcherOptions, CallOptions, Clock, DispatchInfo, OnBatchError } from './option-types.js';
export type {
  BatcherEvents,
  BatcherStats,
  LatencyEstimate,
  OverloadCause,
  RejectReason,
  Summary,
} from './stats-types.js';

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

/**
 * The property that marks a batcher. Registered with `Symbol.for`, so a batcher made by a second copy of core, or
 * by a transport such as a Redis-backed batcher, is recognised too: set `[BATCHER_BRAND]: true` on any object that
 * implements {@link Batcher} or {@link StreamingBatcher} and the adapters accept it.
 */
export const BATCHER_BRAND: unique symbol = Symbol.for('microbatch.batcher');

/** The type of {@link END}. */
export interface StreamEnd {
  readonly microbatch: 'end';
}
/** The type of {@link SKIP}. */
export interface StreamSkip {
  readonly microbatch: 'skip';
}

/**
 * One frozen object per process under a `Symbol.for` key of `globalThis`: two copies of core (`import` and
 * `require`) then hand out the very same `END` and `SKIP`, so a handler of one copy can end a stream of the other.
 */
function shared<T extends object>(name: string, value: T): T {
  const registry = globalThis as { [key: symbol]: unknown };
  const key = Symbol.for(name);
  registry[key] ??= Object.freeze(value);
  return registry[key] as T;
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
export const END: StreamEnd = shared('microbatch.end', { microbatch: 'end' });
/**
 * A slot of a streaming step that carries nothing for its item this step.
 *
 * @example
 * ```ts
 * yield prompts.map((prompt, i) => (produced[i] ? piece[i] : SKIP));
 * ```
 */
export const SKIP: StreamSkip = shared('microbatch.skip', { microbatch: 'skip' });

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

/** Options of `close()`. */
export interface CloseOptions {
  /** Reject queued items with `CLOSED` instead of running them. Running batches still finish. */
  readonly force?: boolean;
}

/** What every batcher has, streaming or not. */
export interface BatcherBase {
  /** Marks the object as a batcher for {@link isBatcher}; transports implementing this interface set it too. */
  readonly [BATCHER_BRAND]: true;
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
  /**
   * One call per input, admitted together or refused together: the queue bound, the fair share and `maxLatencyMs`
   * are checked for the whole group, so a request of several prompts never starts some of them and then fails on
   * the rest. Rejects with the first failure, like `Promise.all` (pass a `signal` to cancel the others). A
   * transport may admit the inputs one by one (see its documentation).
   */
  callAll(inputs: readonly I[], options?: CallOptions): Promise<O[]>;
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
  /** Each item's whole stream, the items admitted together or refused together (see `Batcher.callAll`). */
  callAll(inputs: readonly I[], options?: CallOptions): Promise<O[][]>;
  /**
   * One stream per input, the items admitted together or refused together: when refused, each stream fails with
   * the refusal at its first `next()`.
   */
  streamAll(inputs: readonly I[], options?: CallOptions): Array<AsyncIterableIterator<O>>;
}
