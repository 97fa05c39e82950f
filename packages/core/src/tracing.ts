/**
 * The tracing hook: how a batcher tells a tracer about its batches without depending on any tracing library.
 * `@microbatch/core/otel` implements it with `@opentelemetry/api`, `@microbatch/core/diagnostics` with Node's
 * `diagnostics_channel`; {@link combineTracers} runs several. Without a `tracer` option the engine does no tracing
 * work at all.
 */

/** What a batch tells its tracer when it is dispatched. */
export interface TracedBatch {
  /** The batcher's `name`. */
  readonly batcher: string;
  /** The batch's id (as in `BatchContext.batchId`). */
  readonly batchId: number;
  /** How many calls the batch serves. */
  readonly size: number;
  readonly maxBatchSize: number;
  /** The `batchKey` the batch's inputs share. */
  readonly key: unknown;
  /**
   * What {@link BatchTracer.capture} returned for each call of the batch, in batch order (for OpenTelemetry: the
   * caller's active context).
   */
  readonly callers: readonly unknown[];
  /** Each call's time in the queue, in ms, in batch order. */
  readonly queueTimesMs: readonly number[];
}

/** How a batch ended, given to {@link BatchSpan.end}. */
export interface BatchOutcome {
  /**
   * `'ok'`: every call got its result; `'partial'`: some calls failed (an `Error` result, a cancellation);
   * `'error'`: the handler threw, returned a wrong result or ran past `executionTimeoutMs`.
   */
  readonly outcome: 'ok' | 'partial' | 'error';
  /** Calls of the batch that failed or left before their result. */
  readonly failed: number;
  /** How long the handler ran, in ms. */
  readonly executionMs: number;
}

/** A dispatched batch, as its tracer follows it. */
export interface BatchSpan {
  /**
   * Runs the batch's handler call, so that what the handler does is traced under the batch (for OpenTelemetry:
   * in the batch span's context, not in the context of whichever caller's code happened to dispatch it).
   */
  enter?(run: () => void): void;
  /** Called once, when the batch is over. */
  end(outcome: BatchOutcome): void;
}

/** A remote batch that one sent item started in, as the worker reported it (see {@link BatchTracer.send}). */
export interface RemoteBatch {
  /** The worker's global batch id (`@microbatch/redis`: `<worker>-<sequence>`). */
  readonly batchId: string;
  /** The worker batch's whole size (every replica's items). */
  readonly size: number;
  /** The item's time in the shared queue, in ms. */
  readonly queueWaitMs: number;
}

/** One call sent to another process, as its tracer follows it (see {@link BatchTracer.send}). */
export interface SentItem {
  /** The trace context to send with the item (for OpenTelemetry: W3C `traceparent` / `tracestate`). */
  readonly carrier: Readonly<Record<string, string>>;
  /** The item started in a worker's batch. */
  started(batch: RemoteBatch): void;
  /** The item was answered (`error` undefined) or failed; called once. */
  end(error: unknown): void;
}

/**
 * The tracing hook of a batcher (option `tracer`). `capture` runs on every call, synchronously in the caller's
 * context, so keep it cheap; `startBatch` once per batch.
 *
 * @example
 * ```ts
 * import { createBatcher } from '@microbatch/core';
 * import { otelTracer } from '@microbatch/core/otel';
 *
 * const batcher = createBatcher(embed, { name: 'embed', tracer: otelTracer() });
 * ```
 */
export interface BatchTracer {
  /** What to remember of the caller (its trace context); `undefined` for nothing. */
  capture(): unknown;
  /** Called when a batch is dispatched, before its handler runs. */
  startBatch(batch: TracedBatch): BatchSpan | undefined;
  /**
   * For transports (`@microbatch/redis`): starts following a call whose item another process runs, from what
   * {@link capture} returned for it. Its `carrier` travels with the item; `undefined`: nothing to send.
   */
  send?(captured: unknown, item: { readonly batcher: string }): SentItem | undefined;
  /**
   * For transports: the caller context a `carrier` made by {@link send} in another process stands for, as
   * {@link capture} would return it (it goes in {@link TracedBatch.callers}); `undefined` for none.
   */
  extract?(carrier: Readonly<Record<string, string>>): unknown;
}

/**
 * One tracer that runs several (for example OpenTelemetry and `diagnostics_channel`).
 *
 * @example
 * ```ts
 * createBatcher(embed, { tracer: combineTracers(otelTracer(), diagnosticsTracer()) });
 * ```
 */
export function combineTracers(...tracers: readonly BatchTracer[]): BatchTracer {
  tracers.forEach((tracer, index) => checkTracer(tracer, `tracers[${index}]`));
  if (tracers.length === 1) return tracers[0] as BatchTracer;
  return {
    capture: () => tracers.map((tracer) => tracer.capture()),
    startBatch(batch) {
      const spans = tracers.map((tracer, index) =>
        tracer.startBatch({
          batcher: batch.batcher,
          batchId: batch.batchId,
          size: batch.size,
          maxBatchSize: batch.maxBatchSize,
          key: batch.key,
          get callers() {
            return batch.callers.map((caller) => (caller as unknown[] | undefined)?.[index]);
          },
          get queueTimesMs() {
            return batch.queueTimesMs;
          },
        }),
      );
      const enter = (run: () => void): void => {
        const wrapped = spans.reduceRight<() => void>(
          (next, span) => (span?.enter === undefined ? next : () => span.enter?.(next)),
          run,
        );
        wrapped();
      };
      return { enter, end: (outcome) => spans.forEach((span) => span?.end(outcome)) };
    },
    send(captured, item) {
      const sent = tracers.map((tracer, index) => tracer.send?.((captured as unknown[] | undefined)?.[index], item));
      if (sent.every((one) => one === undefined)) return undefined;
      return {
        carrier: Object.assign({}, ...sent.map((one) => one?.carrier)) as Record<string, string>,
        started: (batch) => sent.forEach((one) => one?.started(batch)),
        end: (error) => sent.forEach((one) => one?.end(error)),
      };
    },
    extract: (carrier) => tracers.map((tracer) => tracer.extract?.(carrier)),
  };
}

/** Throws the `TypeError` for an object that is not a {@link BatchTracer}. */
export function checkTracer(tracer: unknown, name = 'tracer'): void {
  const candidate = tracer as Partial<BatchTracer> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.capture !== 'function' ||
    typeof candidate.startBatch !== 'function'
  ) {
    throw new TypeError(`Expected \`${name}\` to be an object with \`capture\` and \`startBatch\` functions`);
  }
  for (const method of ['send', 'extract'] as const) {
    if (candidate[method] !== undefined && typeof candidate[method] !== 'function')
      throw new TypeError(`Expected \`${name}.${method}\` to be a function when given`);
  }
}

interface TracedItem {
  trace: unknown;
  readonly enqueuedAt: number;
}

/**
 * A dispatched batch as its tracer sees it. `callers` and `queueTimesMs` are gathered on first read, once per batch:
 * a tracer with nothing to record (no SDK registered) reads neither and costs the batch nothing per item.
 */
class BatchView implements TracedBatch {
  readonly batcher: string;
  readonly batchId: number;
  readonly size: number;
  readonly maxBatchSize: number;
  readonly key: unknown;
  readonly #items: readonly TracedItem[];
  readonly #now: number;
  #callers: unknown[] | undefined;
  #queueTimesMs: number[] | undefined;

  constructor(
    batcher: string,
    batchId: number,
    key: unknown,
    items: readonly TracedItem[],
    maxBatchSize: number,
    now: number,
  ) {
    this.batcher = batcher;
    this.batchId = batchId;
    this.key = key;
    this.size = items.length;
    this.maxBatchSize = maxBatchSize;
    this.#items = items;
    this.#now = now;
  }

  get callers(): readonly unknown[] {
    this.#callers ??= this.#items.map((item) => item.trace);
    return this.#callers;
  }

  get queueTimesMs(): readonly number[] {
    this.#queueTimesMs ??= this.#items.map((item) => this.#now - item.enqueuedAt);
    return this.#queueTimesMs;
  }
}

/** Starts a dispatched batch's span (the dispatcher calls it only with a `tracer`). */
export function startBatchSpan(
  tracer: BatchTracer,
  batcher: string,
  batch: { readonly id: number; readonly key: unknown; readonly items: readonly TracedItem[] },
  maxBatchSize: number,
  now: number,
): BatchSpan | undefined {
  return tracer.startBatch(new BatchView(batcher, batch.id, batch.key, batch.items, maxBatchSize, now));
}

/** How a finished batch went, for its span. */
export function batchOutcome(broken: boolean, failed: number, abandoned: number, executionMs: number): BatchOutcome {
  const lost = failed + abandoned;
  return { outcome: broken ? 'error' : lost > 0 ? 'partial' : 'ok', failed: lost, executionMs };
}
