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
import { BatchTally, type QueueSnapshot } from './batch-tally.js';

/** One item handed to {@link QueueBackend.submit}: its input, its stream (if streamed), and how it settles. */
export interface Submission {
  readonly input: unknown;
  readonly channel: ReplyChannel<unknown> | undefined;
  /** Cancels this item (the call's signal, and for a stream its reader's `break`). */
  readonly signal: AbortSignal | undefined;
  settle(error: unknown, value?: unknown): void;
}

/** What a {@link QueueBatcher} needs of its queue. */
export interface QueueBackend {
  /** The broker's name as users know it (`Redis`, `NATS`), for messages. */
  readonly brokerName: string;
  /** The function that starts a worker of this transport (`createRedisWorker`), for messages. */
  readonly workerFactory: string;
  /** The shared queue as last sampled (every heartbeat). */
  readonly snapshot: QueueSnapshot;
  /** Sends a group of items, admitted together or refused together. */
  submit(owner: QueueBatcher, items: readonly Submission[], call: CallOptions): void;
  closeBatcher(batcher: QueueBatcher, options?: CloseOptions): Promise<void>;
}

/**
 * A queue batcher's stats (Redis, NATS): core's {@link BatcherStats}, whose batch figures are the workers' batches that ran
 * this batcher's items (as the workers reported them), plus `shared`, the whole queue as last sampled.
 */
export interface QueueBatcherStats extends BatcherStats {
  readonly shared: QueueSnapshot;
}

type Listener = (payload: never) => void;

/** The settings workers form batches with: the replica reports them; it cannot set them. */
const WORKER_SETTINGS = {
  maxBatchSize: 'maxBatchSize',
  batchWaitTimeoutMs: 'batchWaitTimeoutMs',
  maxConcurrentBatches: 'concurrency',
} as const;

/** The batcher facade of one handler name: the `Batcher` / `StreamingBatcher` interface over the queue. */
export class QueueBatcher {
  readonly name: string;
  readonly streaming: boolean;
  readonly facade: Batcher<unknown, unknown> | StreamingBatcher<unknown, unknown>;
  /** This batcher's items as they wait, run and end, and the workers' batches that ran them. */
  readonly tally = new BatchTally((event, payload) => this.#emit(event, payload));
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
      streaming
        ? this.collect(this.streamAll([input], options)[0] as AsyncIterableIterator<unknown>)
        : this.callAll([input], options).then((values) => values[0]);
    const facade = Object.assign(call, {
      [BATCHER_BRAND]: true as const,
      call,
      stream: (input: unknown, options: CallOptions = {}) => this.streamAll([input], options)[0],
      callAll: (inputs: readonly unknown[], options: CallOptions = {}) =>
        streaming
          ? Promise.all(this.streamAll(inputs, options).map((stream) => this.collect(stream)))
          : this.callAll(inputs, options),
      streamAll: (inputs: readonly unknown[], options: CallOptions = {}) => this.streamAll(inputs, options),
      stats: () => this.stats(),
      on: <E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void) =>
        this.on(event, listener),
      close: (options?: CloseOptions) => this.close(options),
    });
    for (const property of ['name', 'streaming', 'queueLength', 'inFlightBatches', 'closed'] as const) {
      Object.defineProperty(facade, property, { get: () => this[property], enumerable: true });
    }
    // Read from the live workers' heartbeats; setting one here would change nothing, so it is refused.
    for (const [property, setting] of Object.entries(WORKER_SETTINGS)) {
      Object.defineProperty(facade, property, {
        get: () => this.#workerSetting(setting),
        set: () => {
          throw new TypeError(
            `\`${property}\` cannot be set on the ${core.brokerName} queue batcher \`${name}\`: the workers form the ` +
              `batches (set \`${setting}\` in \`${core.workerFactory}\`, or \`microbatch worker\`'s flags)`,
          );
        },
        enumerable: true,
      });
    }
    this.facade = facade as unknown as Batcher<unknown, unknown> | StreamingBatcher<unknown, unknown>;
  }

  /** This batcher's items queued and not yet started by a worker. */
  get queueLength(): number {
    return this.tally.waiting;
  }

  /** Worker batches running this batcher's items now. */
  get inFlightBatches(): number {
    return this.tally.inFlightBatches;
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** The largest `maxBatchSize` / `batchWaitTimeoutMs`, or the sum of `concurrency`, over the live workers. */
  #workerSetting(setting: (typeof WORKER_SETTINGS)[keyof typeof WORKER_SETTINGS]): number {
    const values = this.#core.snapshot.workerSettings.map((settings) => settings[setting]);
    if (setting === 'concurrency') return values.reduce((sum, value) => sum + value, 0);
    return values.length === 0 ? 0 : Math.max(...values);
  }

  /** The inputs' results, their items admitted together or refused together (by the queue). */
  callAll(inputs: readonly unknown[], options: CallOptions): Promise<unknown[]> {
    const items: Submission[] = [];
    const results = inputs.map(
      (input) =>
        new Promise((resolve, reject) => {
          items.push({
            input,
            channel: undefined,
            signal: options.signal,
            settle: (error, value) => (error === undefined ? resolve(value) : reject(error)),
          });
        }),
    );
    this.#core.submit(this, items, options);
    return Promise.all(results);
  }

  /** One stream per input, admitted together or refused together; a reader's `break` cancels only its item. */
  streamAll(inputs: readonly unknown[], options: CallOptions): Array<AsyncIterableIterator<unknown>> {
    const items = inputs.map((input): Submission => {
      const controller = new AbortController();
      const channel = new ReplyChannel<unknown>(() =>
        controller.abort(new DOMException('The stream was closed by its reader', 'AbortError')),
      );
      return {
        input,
        channel,
        signal: options.signal === undefined ? controller.signal : AbortSignal.any([options.signal, controller.signal]),
        settle: (error) => (error === undefined ? channel.end() : channel.fail(error)),
      };
    });
    this.#core.submit(this, items, options);
    return items.map((item) => item.channel!);
  }

  async collect(stream: AsyncIterableIterator<unknown>): Promise<unknown[]> {
    const values: unknown[] = [];
    for await (const value of stream) values.push(value);
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

  stats(): QueueBatcherStats {
    const rejected = Object.fromEntries(
      [...Object.values(ErrorCode), 'CANCELLED'].map((reason) => [
        reason,
        this.#rejected.get(reason as RejectReason) ?? 0,
      ]),
    );
    return {
      name: this.name,
      ...this.tally.figures(),
      succeeded: this.#succeeded,
      failed: this.#failed,
      rejected: rejected as BatcherStats['rejected'],
      expired: this.#expired,
      cancelled: this.#cancelled,
      // This transport refuses on its global bound (`QUEUE_FULL`), with no latency model of its own.
      overloaded: { latency: 0, deadline: 0, 'fair-share': 0 },
      estimate: { ready: false, samples: 0, msPerCost: 0, msPerBatch: 0 },
      maxLatencyMs: Number.POSITIVE_INFINITY,
      predictedLatencyMs: Number.NaN,
      shared: this.#core.snapshot,
    };
  }

  close(options?: CloseOptions): Promise<void> {
    this.#closing ??= this.#core.closeBatcher(this, options);
    return this.#closing;
  }
}

/**
 * The batcher named `name` of a queue's `batchers`, created (and kept) on first use; one name is one handler, so it
 * cannot be both a streaming and a plain batcher.
 *
 * @example
 * ```ts
 * batcher(name: string, streaming: boolean): QueueBatcher {
 *   return namedBatcher(this.#batchers, name, streaming, this);
 * }
 * ```
 */
export function namedBatcher(
  batchers: Map<string, QueueBatcher>,
  name: string,
  streaming: boolean,
  backend: QueueBackend,
): QueueBatcher {
  if (typeof name !== 'string' || name === '')
    throw new TypeError(`Expected \`name\` to be a non-empty string, got ${JSON.stringify(name)}`);
  const existing = batchers.get(name);
  if (existing !== undefined) {
    if (existing.streaming !== streaming)
      throw new TypeError(
        `The handler name \`${name}\` is already used by a ${existing.streaming ? 'streaming ' : ''}batcher`,
      );
    return existing;
  }
  const created = new QueueBatcher(name, streaming, backend);
  batchers.set(name, created);
  return created;
}
