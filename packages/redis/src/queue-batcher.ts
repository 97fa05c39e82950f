import { BATCHER_BRAND, BatchError, ErrorCode } from '@microbatch/core';
import type {
  Batcher,
  BatcherEvents,
  BatcherStats,
  CallOptions,
  CloseOptions,
  RejectReason,
  StreamingBatcher,
} from '@microbatch/core';
import { ReplyChannel } from './reply-channel.js';

/** What a {@link QueueBatcher} needs of its queue. */
export interface QueueBackend {
  /** Items of every batcher of the queue waiting for their answers. */
  readonly pending: number;
  submit(
    owner: QueueBatcher,
    input: unknown,
    call: CallOptions,
    channel: ReplyChannel<unknown> | undefined,
    settle: (error: unknown, value?: unknown) => void,
  ): void;
  closeBatcher(batcher: QueueBatcher, options?: CloseOptions): Promise<void>;
}

type Listener = (payload: never) => void;

/** The batcher facade of one handler name: the `Batcher` / `StreamingBatcher` interface over the queue. */
export class QueueBatcher {
  readonly name: string;
  readonly streaming: boolean;
  /** What a worker's pull takes at most is the worker's setting; this is what Nest's `@Batch()` groups locally. */
  maxBatchSize = 8;
  batchWaitTimeoutMs = 0;
  maxConcurrentBatches = 16;
  readonly facade: Batcher<unknown, unknown> | StreamingBatcher<unknown, unknown>;
  readonly #core: QueueBackend;
  readonly #listeners = new Map<keyof BatcherEvents, Set<Listener>>();
  #closing: Promise<void> | undefined;
  #succeeded = 0;
  #failed = 0;
  #cancelled = 0;
  #expired = 0;
  readonly #rejected = new Map<RejectReason, number>();

  constructor(name: string, streaming: boolean, core: QueueBackend) {
    this.name = name;
    this.streaming = streaming;
    this.#core = core;
    const call = (input: unknown, options: CallOptions = {}): Promise<unknown> =>
      streaming ? this.collect(input, options) : this.call(input, options);
    const facade = Object.assign(call, {
      [BATCHER_BRAND]: true as const,
      call,
      stream: (input: unknown, options: CallOptions = {}) => this.stream(input, options),
      // The shared queue admits item by item (its bound is global), so a group may be admitted in part.
      callAll: (inputs: readonly unknown[], options: CallOptions = {}) =>
        Promise.all(inputs.map((input) => call(input, options))),
      streamAll: (inputs: readonly unknown[], options: CallOptions = {}) =>
        inputs.map((input) => this.stream(input, options)),
      stats: () => this.stats(),
      on: <E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void) =>
        this.on(event, listener),
      close: (options?: CloseOptions) => this.close(options),
    });
    for (const property of ['name', 'streaming', 'queueLength', 'inFlightBatches', 'closed'] as const) {
      Object.defineProperty(facade, property, { get: () => this[property], enumerable: true });
    }
    for (const property of ['maxBatchSize', 'batchWaitTimeoutMs', 'maxConcurrentBatches'] as const) {
      Object.defineProperty(facade, property, {
        get: () => this[property],
        set: (value: number) => {
          this[property] = value;
        },
        enumerable: true,
      });
    }
    this.facade = facade as unknown as Batcher<unknown, unknown> | StreamingBatcher<unknown, unknown>;
  }

  get queueLength(): number {
    return this.#core.pending;
  }

  get inFlightBatches(): number {
    return 0;
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  call(input: unknown, options: CallOptions): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#core.submit(this, input, options, undefined, (error, value) =>
        error === undefined ? resolve(value) : reject(error),
      );
    });
  }

  stream(input: unknown, options: CallOptions): AsyncIterableIterator<unknown> {
    const controller = new AbortController();
    const signal =
      options.signal === undefined ? controller.signal : AbortSignal.any([options.signal, controller.signal]);
    const channel: ReplyChannel<unknown> = new ReplyChannel(() =>
      controller.abort(new DOMException('The stream was closed by its reader', 'AbortError')),
    );
    this.#core.submit(this, input, { ...options, signal }, channel, (error) =>
      error === undefined ? channel.end() : channel.fail(error),
    );
    return channel;
  }

  async collect(input: unknown, options: CallOptions): Promise<unknown[]> {
    const values: unknown[] = [];
    for await (const value of this.stream(input, options)) values.push(value);
    return values;
  }

  /** Counts how an item ended and reports refusals and failures. */
  count(error: unknown): void {
    if (error === undefined) {
      this.#succeeded += 1;
      return;
    }
    const code = error instanceof BatchError ? error.code : undefined;
    const reason: RejectReason = code ?? 'CANCELLED';
    if (reason === 'CANCELLED') this.#cancelled += 1;
    else if (reason === ErrorCode.DEADLINE_EXCEEDED) this.#expired += 1;
    else if (reason === ErrorCode.HANDLER_ERROR || reason === ErrorCode.BAD_HANDLER_RESULT) this.#failed += 1;
    this.#rejected.set(reason, (this.#rejected.get(reason) ?? 0) + 1);
    this.#emit('reject', { reason, error });
  }

  on<E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void): () => void {
    const set = this.#listeners.get(event) ?? new Set<Listener>();
    this.#listeners.set(event, set);
    set.add(listener);
    return () => set.delete(listener);
  }

  #emit<E extends keyof BatcherEvents>(event: E, payload: BatcherEvents[E]): void {
    for (const listener of this.#listeners.get(event) ?? []) {
      try {
        (listener as (payload: BatcherEvents[E]) => void)(payload);
      } catch {
        // A listener's failure must not fail the item.
      }
    }
  }

  stats(): BatcherStats {
    const rejected = Object.fromEntries(
      [...Object.values(ErrorCode), 'CANCELLED'].map((reason) => [
        reason,
        this.#rejected.get(reason as RejectReason) ?? 0,
      ]),
    );
    const none = { count: 0, sum: 0, mean: 0, max: 0 };
    return {
      name: this.name,
      queueLength: this.queueLength,
      inFlightBatches: 0,
      // Batches run on the workers, which report them; a replica only sees its items.
      batchesProcessed: 0,
      itemsProcessed: this.#succeeded + this.#failed,
      lastBatchSize: 0,
      meanBatchSize: 0,
      batchUtilizationPercent: 0,
      queueWaitMs: none,
      executionMs: none,
      succeeded: this.#succeeded,
      failed: this.#failed,
      rejected: rejected as BatcherStats['rejected'],
      expired: this.#expired,
      cancelled: this.#cancelled,
      overloaded: { latency: 0, deadline: 0, 'fair-share': 0 },
      estimate: { ready: false, samples: 0, msPerCost: 0, msPerBatch: 0 },
      maxLatencyMs: Number.POSITIVE_INFINITY,
      predictedLatencyMs: Number.NaN,
    };
  }

  close(options?: CloseOptions): Promise<void> {
    this.#closing ??= this.#core.closeBatcher(this, options);
    return this.#closing;
  }
}
