import { BatchError, ErrorCode, isBatchError } from './errors.js';
import { ItemStream } from './item-stream.js';
import { type Item, ItemState, KeyQueue, type RunningBatch } from './key-queue.js';
import { Emitter, StatsRecorder } from './metrics.js';
import {
  DEFAULT_OPTIONS,
  checkCallOptions,
  checkInteger,
  checkNumber,
  describe,
  resolveOptions,
  type ResolvedOptions,
} from './options.js';
import {
  type BatchContext,
  type BatchHandler,
  type Batcher,
  type BatcherEvents,
  type BatcherOptions,
  type BatcherStats,
  type CallOptions,
  type CloseOptions,
  END,
  type RejectReason,
  SKIP,
  type StreamingBatchHandler,
  type StreamingBatcher,
} from './types.js';

const NO_OPTIONS: CallOptions = Object.freeze({});
const RESOLVED = Promise.resolve();

type AnyHandler = (inputs: unknown[], context: BatchContext) => unknown;

/**
 * The queue discipline and dispatch loop shared by plain and streaming batchers.
 * Items wait per batch key; a key's batch is dispatched when it is full or when its oldest item has waited
 * `batchWaitTimeoutMs`, whenever fewer than `maxConcurrentBatches` handler calls are running.
 */
class BatchEngine {
  readonly #handler: AnyHandler;
  readonly #streaming: boolean;
  readonly #options: ResolvedOptions<unknown>;
  #maxBatchSize: number;
  #batchWaitTimeoutMs: number;
  #maxConcurrentBatches: number;
  readonly #queues = new Map<unknown, KeyQueue>();
  #queued = 0;
  #inFlight = 0;
  #seq = 0;
  #batchSeq = 0;
  #timer: unknown;
  #timerAt = Number.POSITIVE_INFINITY;
  #pumping = false;
  #closed = false;
  #drained: Promise<void> | undefined;
  #resolveDrained: (() => void) | undefined;
  readonly #emitter = new Emitter();
  readonly #stats = new StatsRecorder();
  readonly #batchKey: ((input: unknown) => unknown) | undefined;
  readonly #cost: ((input: unknown) => number) | undefined;
  #now: number | undefined;
  readonly #forgetNow = (): void => {
    this.#now = undefined;
  };

  constructor(handler: AnyHandler, streaming: boolean, options: BatcherOptions<unknown> | undefined) {
    if (typeof handler !== 'function') {
      throw new TypeError(`Expected \`handler\` to be a function, got ${describe(handler)}`);
    }
    this.#handler = handler;
    this.#streaming = streaming;
    this.#options = resolveOptions(options);
    this.#maxBatchSize = this.#options.maxBatchSize;
    this.#batchWaitTimeoutMs = this.#options.batchWaitTimeoutMs;
    this.#maxConcurrentBatches = this.#options.maxConcurrentBatches;
    this.#batchKey = this.#options.batchKey === DEFAULT_OPTIONS.batchKey ? undefined : this.#options.batchKey;
    this.#cost = this.#options.cost === DEFAULT_OPTIONS.cost ? undefined : this.#options.cost;
  }

  /**
   * The clock read once per synchronous burst: calls made in the same tick arrived together, and reading the clock
   * for each of them was the largest single cost per item.
   */
  #tickNow(): number {
    if (this.#now === undefined) {
      this.#now = this.#options.clock.now();
      // Not queueMicrotask: in Node it allocates an AsyncResource per call.
      void RESOLVED.then(this.#forgetNow);
    }
    return this.#now;
  }

  get name(): string {
    return this.#options.name;
  }
  get streaming(): boolean {
    return this.#streaming;
  }
  get maxBatchSize(): number {
    return this.#maxBatchSize;
  }
  set maxBatchSize(value: number) {
    this.#maxBatchSize = checkInteger('maxBatchSize', value, 1);
    this.#pump();
  }
  get batchWaitTimeoutMs(): number {
    return this.#batchWaitTimeoutMs;
  }
  set batchWaitTimeoutMs(value: number) {
    this.#batchWaitTimeoutMs = checkNumber('batchWaitTimeoutMs', value, 0, false, false);
    this.#timerAt = Number.POSITIVE_INFINITY;
    this.#pump();
  }
  get maxConcurrentBatches(): number {
    return this.#maxConcurrentBatches;
  }
  set maxConcurrentBatches(value: number) {
    this.#maxConcurrentBatches = checkInteger('maxConcurrentBatches', value, 1);
    this.#pump();
  }
  get queueLength(): number {
    return this.#queued;
  }
  get inFlightBatches(): number {
    return this.#inFlight;
  }
  get closed(): boolean {
    return this.#closed;
  }

  stats(): BatcherStats {
    return this.#stats.snapshot(this.#options.name, this.#queued, this.#inFlight);
  }

  on<E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void): () => void {
    return this.#emitter.on(event, listener);
  }

  call(input: unknown, options: CallOptions = NO_OPTIONS): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#submit(input, options, resolve, reject, undefined);
    });
  }

  stream(input: unknown, options: CallOptions = NO_OPTIONS): ItemStream<unknown> {
    const sink = new ItemStream<unknown>();
    this.#submit(input, options, undefined, undefined, sink);
    return sink;
  }

  close(options: CloseOptions = {}): Promise<void> {
    this.#closed = true;
    if (options.force === true) {
      const error = this.#closedError();
      for (const queue of [...this.#queues.values()]) {
        for (const item of [...queue.items]) this.#rejectQueued(item, error, ErrorCode.CLOSED);
      }
    }
    this.#drained ??= new Promise((resolve) => {
      this.#resolveDrained = resolve;
    });
    this.#pump();
    this.#checkDrained();
    return this.#drained;
  }

  #closedError(): BatchError {
    return new BatchError(ErrorCode.CLOSED, `Batcher "${this.#options.name}" is closed`, {
      retryAfterSeconds: this.#options.retryAfterSeconds,
    });
  }

  #submit(
    input: unknown,
    options: CallOptions,
    resolve: ((value: unknown) => void) | undefined,
    reject: ((error: unknown) => void) | undefined,
    sink: ItemStream<unknown> | undefined,
  ): void {
    const { signal } = options;
    const now = this.#tickNow();
    const item: Item = {
      input,
      key: undefined,
      cost: 1,
      priority: options.priority ?? 0,
      seq: this.#seq++,
      enqueuedAt: now,
      state: ItemState.Queued,
      resolve,
      reject,
      sink,
      signal,
      onAbort: undefined,
      timer: undefined,
      onDispatch: options.onDispatch,
      batch: undefined,
    };
    // Refusals live in their own method so this hot path stays small enough for the optimizer to keep.
    if (!this.#admit(item, options)) return;
    const timeoutMs = options.timeoutMs === undefined ? this.#options.timeoutMs : Math.min(options.timeoutMs, this.#options.timeoutMs);
    if (sink !== undefined || signal !== undefined || timeoutMs !== Number.POSITIVE_INFINITY) this.#watch(item, timeoutMs);

    let queue = this.#queues.get(item.key);
    const opened = queue === undefined;
    if (queue === undefined) {
      queue = new KeyQueue(item.key, now);
      this.#queues.set(item.key, queue);
    }
    queue.insert(item);
    this.#queued += 1;
    // An item joining a partly filled, not yet full batch changes nothing the timer does not already cover.
    if (opened || queue.isFull(this.#maxBatchSize, this.#options.maxBatchCost)) this.#pump();
  }

  /**
   * Subscribes to the item's cancellation and deadline. Kept out of `#submit` because closures there would make
   * every call allocate their scope, even calls with no signal and no deadline.
   */
  #watch(item: Item, timeoutMs: number): void {
    const { sink, signal } = item;
    if (sink !== undefined) sink.onCancel = () => this.#cancel(item, new DOMException('The stream consumer stopped', 'AbortError'));
    if (signal !== undefined) {
      item.onAbort = () => this.#cancel(item, signal.reason);
      signal.addEventListener('abort', item.onAbort, { once: true });
    }
    if (timeoutMs !== Number.POSITIVE_INFINITY) {
      item.timer = this.#options.clock.setTimeout(() => this.#expire(item, timeoutMs), timeoutMs);
    }
  }

  /** Computes the item's key and cost, or refuses it (settling it at once) and returns false. */
  #admit(item: Item, options: CallOptions): boolean {
    if (options !== NO_OPTIONS) {
      try {
        checkCallOptions(options);
      } catch (error) {
        return this.#refuse(item, error, ErrorCode.INVALID_INPUT);
      }
    }
    if (this.#closed) return this.#refuse(item, this.#closedError(), ErrorCode.CLOSED);
    if (options.signal?.aborted === true) return this.#refuse(item, options.signal.reason, 'CANCELLED');
    if (this.#queued >= this.#options.maxQueueSize) {
      const error = new BatchError(
        ErrorCode.QUEUE_FULL,
        `Batcher "${this.#options.name}" queue is full (maxQueueSize = ${this.#options.maxQueueSize})`,
        { retryAfterSeconds: this.#options.retryAfterSeconds },
      );
      return this.#refuse(item, error, ErrorCode.QUEUE_FULL);
    }
    if (this.#batchKey !== undefined) {
      try {
        item.key = this.#batchKey(item.input);
      } catch (error) {
        return this.#refuse(item, this.#inputError('batchKey', error), ErrorCode.INVALID_INPUT);
      }
    }
    if (this.#cost === undefined) return true;
    let cost: unknown;
    try {
      cost = this.#cost(item.input);
    } catch (error) {
      return this.#refuse(item, this.#inputError('cost', error), ErrorCode.INVALID_INPUT);
    }
    if (typeof cost !== 'number' || !Number.isFinite(cost) || cost < 0) {
      // A bad cost is a bug in the caller's cost function, not in the request: it must not look like a 400.
      const error = new TypeError(`Expected \`cost\` to return a finite number >= 0, got ${describe(cost)}`);
      return this.#refuse(item, error, ErrorCode.HANDLER_ERROR);
    }
    if (cost > this.#options.maxBatchCost) {
      const error = new BatchError(ErrorCode.ITEM_TOO_LARGE, `Item cost ${cost} exceeds maxBatchCost ${this.#options.maxBatchCost}`, {
        details: { cost, maxBatchCost: this.#options.maxBatchCost },
      });
      return this.#refuse(item, error, ErrorCode.ITEM_TOO_LARGE);
    }
    item.cost = cost;
    return true;
  }

  #refuse(item: Item, error: unknown, reason: RejectReason): false {
    this.#settle(item, undefined, error, reason);
    return false;
  }

  #inputError(option: 'batchKey' | 'cost', error: unknown): BatchError {
    if (isBatchError(error)) return error;
    return new BatchError(ErrorCode.INVALID_INPUT, `\`${option}\` failed for this input`, { cause: error, expose: false });
  }

  /** Dispatches every ready batch there is room for, then arms the timer for the next window to close. */
  #pump(): void {
    // A handler that calls the batcher synchronously re-enters here; the outer loop picks its item up.
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#inFlight < this.#maxConcurrentBatches && this.#queued > 0) {
        const now = this.#tickNow();
        const queue = this.#nextReady(now);
        if (queue === undefined) break;
        this.#dispatch(queue, now);
      }
      this.#armTimer();
    } finally {
      this.#pumping = false;
    }
  }

  /** The ready queue whose head should go first: highest priority, then oldest; no key waits behind another forever. */
  #nextReady(now: number): KeyQueue | undefined {
    let best: KeyQueue | undefined;
    for (const queue of this.#queues.values()) {
      const ready =
        this.#closed ||
        queue.isFull(this.#maxBatchSize, this.#options.maxBatchCost) ||
        now - queue.windowStart >= this.#batchWaitTimeoutMs;
      if (!ready) continue;
      if (best === undefined) {
        best = queue;
        continue;
      }
      const head = queue.items[0] as Item;
      const bestHead = best.items[0] as Item;
      if (head.priority > bestHead.priority || (head.priority === bestHead.priority && head.seq < bestHead.seq)) best = queue;
    }
    return best;
  }

  #armTimer(): void {
    let at = Number.POSITIVE_INFINITY;
    if (this.#inFlight < this.#maxConcurrentBatches) {
      for (const queue of this.#queues.values()) at = Math.min(at, queue.windowStart + this.#batchWaitTimeoutMs);
    }
    if (at === this.#timerAt) return;
    if (this.#timer !== undefined) this.#options.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = at;
    if (at === Number.POSITIVE_INFINITY) return;
    const delay = Math.max(0, at - this.#options.clock.now());
    this.#timer = this.#options.clock.setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Number.POSITIVE_INFINITY;
      this.#now = undefined;
      this.#pump();
    }, delay);
  }

  #dispatch(queue: KeyQueue, now: number): void {
    const items = queue.take(this.#maxBatchSize, this.#options.maxBatchCost);
    if (queue.items.length === 0) this.#queues.delete(queue.key);
    this.#queued -= items.length;
    this.#inFlight += 1;
    const batch: RunningBatch = {
      id: ++this.#batchSeq,
      key: queue.key,
      items,
      controller: undefined,
      startedAt: now,
      open: items.length,
      failed: 0,
      timer: undefined,
      endedAt: undefined,
      finished: false,
    };
    this.#stats.recordBatch(items.length, this.#maxBatchSize);
    const queueTimesMs: number[] | undefined = this.#emitter.has('batchStart') ? [] : undefined;
    const { queueWait } = this.#stats;
    for (const item of items) {
      item.state = ItemState.Running;
      item.batch = batch;
      const queueTimeMs = now - item.enqueuedAt;
      queueTimesMs?.push(queueTimeMs);
      queueWait.add(queueTimeMs);
      if (item.onDispatch !== undefined) {
        try {
          item.onDispatch({ batchId: batch.id, batchSize: items.length, queueTimeMs, key: queue.key });
        } catch (error) {
          this.#fail(item, error);
        }
      }
    }
    if (queueTimesMs !== undefined) {
      this.#emitter.emit('batchStart', {
        batchId: batch.id,
        batchSize: items.length,
        maxBatchSize: this.#maxBatchSize,
        key: queue.key,
        queueTimesMs,
      });
    }
    if (this.#options.executionTimeoutMs !== Number.POSITIVE_INFINITY) {
      batch.timer = this.#options.clock.setTimeout(() => this.#timeOut(batch), this.#options.executionTimeoutMs);
    }
    void this.#run(batch);
  }

  async #run(batch: RunningBatch): Promise<void> {
    const context = new Context(batch);
    // An item can already be settled here (its `onDispatch` threw); its input must not reach the handler.
    const items = batch.open === batch.items.length ? batch.items : batch.items.filter((item) => item.state === ItemState.Running);
    try {
      if (items.length === 0) return;
      if (this.#streaming) await this.#runStream(items, context);
      else await this.#runItems(items, context, batch);
    } catch (error) {
      // Defensive: #runItems/#runStream settle every item themselves; this keeps the invariant if they ever throw.
      for (const item of batch.items) this.#fail(item, error);
    } finally {
      this.#finish(batch);
    }
  }

  /**
   * Runs the handler over `items`. `batch` is given for the top-level call only: its slot is released as soon as
   * the handler is done, before the callers' continuations (writing their responses) run, so the next batch is
   * already on its way to the model meanwhile. Isolating sub-calls keep the slot until the last one is done.
   */
  async #runItems(items: Item[], context: BatchContext, batch?: RunningBatch): Promise<void> {
    let results: unknown;
    try {
      results = await this.#handler(
        items.map((item) => item.input),
        context,
      );
    } catch (error) {
      const open = items.filter((item) => item.state === ItemState.Running);
      if (this.#options.onBatchError === 'isolate' && open.length > 1 && !context.signal.aborted) {
        const middle = Math.ceil(open.length / 2);
        await this.#runItems(open.slice(0, middle), context);
        await this.#runItems(open.slice(middle), context);
        return;
      }
      if (batch !== undefined) this.#release(batch);
      for (const item of open) this.#fail(item, error);
      return;
    }
    if (batch !== undefined) this.#release(batch);
    if (!Array.isArray(results) || results.length !== items.length) {
      const error = badResult(items.length, results);
      for (const item of items) this.#fail(item, error);
      return;
    }
    for (let index = 0; index < items.length; index += 1) {
      const item = items[index] as Item;
      const result: unknown = results[index];
      if (result instanceof Error) this.#fail(item, result);
      else this.#succeed(item, result);
    }
  }

  async #runStream(items: Item[], context: BatchContext): Promise<void> {
    let iterator: AsyncIterator<unknown> | undefined;
    let stoppedEarly = false;
    try {
      const iterable = this.#handler(
        items.map((item) => item.input),
        context,
      ) as AsyncIterable<unknown> | null | undefined;
      if (typeof iterable?.[Symbol.asyncIterator] !== 'function') {
        throw new BatchError(
          ErrorCode.BAD_HANDLER_RESULT,
          `Expected the streaming batch handler to return an async iterable, got ${describe(iterable)}`,
        );
      }
      iterator = iterable[Symbol.asyncIterator]();
      for (;;) {
        const step = await iterator.next();
        if (step.done === true) break;
        const slots: unknown = step.value;
        if (!Array.isArray(slots) || slots.length !== items.length) {
          stoppedEarly = true;
          throw badResult(items.length, slots, 'step');
        }
        for (let index = 0; index < items.length; index += 1) {
          const item = items[index] as Item;
          if (item.state !== ItemState.Running) continue;
          const slot: unknown = slots[index];
          if (slot === SKIP) continue;
          if (slot === END) this.#succeed(item, undefined);
          else if (slot instanceof Error) this.#fail(item, slot);
          else item.sink?.push(slot);
        }
        const batch = (items[0] as Item).batch as RunningBatch;
        if (batch.open === 0) {
          stoppedEarly = true;
          break;
        }
      }
      for (const item of items) this.#succeed(item, undefined);
    } catch (error) {
      for (const item of items) this.#fail(item, error);
    } finally {
      if (stoppedEarly) await iterator?.return?.()?.catch(() => undefined);
    }
  }

  #timeOut(batch: RunningBatch): void {
    batch.timer = undefined;
    const error = new BatchError(
      ErrorCode.EXECUTION_TIMEOUT,
      `Batch ${batch.id} ran longer than executionTimeoutMs (${this.#options.executionTimeoutMs} ms)`,
    );
    for (const item of batch.items) this.#fail(item, error);
    controllerOf(batch).abort(error);
    // The slot is freed now: a handler that ignores its signal must not stall every later batch.
    this.#finish(batch);
  }

  /** Frees the batch's concurrency slot and dispatches what is ready; the first call counts. */
  #release(batch: RunningBatch): void {
    if (batch.endedAt !== undefined) return;
    batch.endedAt = this.#options.clock.now();
    if (batch.timer !== undefined) this.#options.clock.clearTimeout(batch.timer);
    this.#inFlight -= 1;
    this.#pump();
  }

  #finish(batch: RunningBatch): void {
    if (batch.finished) return;
    batch.finished = true;
    this.#release(batch);
    const executionMs = (batch.endedAt as number) - batch.startedAt;
    this.#stats.execution.add(executionMs);
    if (this.#emitter.has('batchEnd')) {
      const { id: batchId, items, key, failed } = batch;
      this.#emitter.emit('batchEnd', { batchId, batchSize: items.length, key, executionMs, failed });
    }
    this.#checkDrained();
  }

  #checkDrained(): void {
    if (this.#resolveDrained !== undefined && this.#queued === 0 && this.#inFlight === 0) {
      this.#resolveDrained();
      this.#resolveDrained = undefined;
    }
  }

  /** Called when the caller aborts or stops consuming: queued, the item leaves; running, it settles now. */
  #cancel(item: Item, reason: unknown): void {
    if (item.state === ItemState.Queued) this.#rejectQueued(item, reason, 'CANCELLED');
    else if (item.state === ItemState.Running) this.#settleEarly(item, reason, 'CANCELLED');
  }

  #expire(item: Item, timeoutMs: number): void {
    item.timer = undefined;
    const where = item.state === ItemState.Queued ? 'queued' : 'running';
    const error = new BatchError(ErrorCode.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded while ${where}`);
    if (item.state === ItemState.Queued) this.#rejectQueued(item, error, ErrorCode.DEADLINE_EXCEEDED);
    else if (item.state === ItemState.Running) this.#settleEarly(item, error, ErrorCode.DEADLINE_EXCEEDED);
  }

  #rejectQueued(item: Item, error: unknown, reason: RejectReason): void {
    const queue = this.#queues.get(item.key);
    if (queue?.remove(item) === true) {
      this.#queued -= 1;
      if (queue.items.length === 0) this.#queues.delete(item.key);
    }
    this.#settle(item, undefined, error, reason);
    this.#armTimer();
    this.#checkDrained();
  }

  /** Settles a running item before its batch ends; the handler's signal aborts once no item still wants a result. */
  #settleEarly(item: Item, error: unknown, reason: RejectReason): void {
    this.#settle(item, undefined, error, reason);
    const batch = item.batch as RunningBatch;
    if (batch.open === 0) {
      const controller = controllerOf(batch);
      if (!controller.signal.aborted) controller.abort(error);
    }
  }

  #succeed(item: Item, value: unknown): void {
    if (item.state !== ItemState.Running) return;
    this.#stats.succeeded += 1;
    this.#settle(item, value, undefined, undefined);
  }

  #fail(item: Item, error: unknown): void {
    if (item.state !== ItemState.Running) return;
    this.#stats.failed += 1;
    (item.batch as RunningBatch).failed += 1;
    this.#settle(item, undefined, error, isBatchError(error) ? error.code : ErrorCode.HANDLER_ERROR);
  }

  /** The one place an item settles: exactly once, with its listeners and timers cleaned up. */
  #settle(item: Item, value: unknown, error: unknown, reason: RejectReason | undefined): void {
    const { state } = item;
    if (state === ItemState.Settled) return;
    item.state = ItemState.Settled;
    if (state === ItemState.Running) (item.batch as RunningBatch).open -= 1;
    if (item.onAbort !== undefined) {
      item.signal?.removeEventListener('abort', item.onAbort);
      item.onAbort = undefined;
    }
    if (item.timer !== undefined) {
      this.#options.clock.clearTimeout(item.timer);
      item.timer = undefined;
    }
    if (reason !== undefined) this.#count(reason, error);
    if (item.sink !== undefined) {
      if (reason === undefined) item.sink.end();
      else item.sink.fail(error);
    } else if (reason === undefined) {
      item.resolve?.(value);
    } else {
      item.reject?.(error);
    }
  }

  #count(reason: RejectReason, error: unknown): void {
    this.#stats.rejected[reason] += 1;
    if (this.#emitter.has('reject')) this.#emitter.emit('reject', { reason, error });
  }
}

/**
 * The handler's context. A class with a prototype getter, not an object literal with `get signal()`: a literal
 * accessor gets a fresh hidden class per batch and made the engine four times slower in `pnpm bench:core`.
 */
class Context implements BatchContext {
  readonly #batch: RunningBatch;
  readonly batchId: number;
  readonly key: unknown;

  constructor(batch: RunningBatch) {
    this.#batch = batch;
    this.batchId = batch.id;
    this.key = batch.key;
  }

  /** Created on first use: an AbortController per batch is a measurable share of the per-item overhead. */
  get signal(): AbortSignal {
    return controllerOf(this.#batch).signal;
  }
}

function controllerOf(batch: RunningBatch): AbortController {
  batch.controller ??= new AbortController();
  return batch.controller;
}

function badResult(expected: number, actual: unknown, what = 'result'): BatchError {
  const got = Array.isArray(actual) ? `an array of ${actual.length}` : describe(actual);
  return new BatchError(
    ErrorCode.BAD_HANDLER_RESULT,
    `Expected the batch handler to return ${what === 'step' ? 'steps, each ' : ''}an array of ${expected} ${
      what === 'step' ? 'slots' : 'results'
    } (one per input), got ${got}`,
  );
}

function isAsyncGeneratorFunction(value: unknown): boolean {
  return Object.prototype.toString.call(value) === '[object AsyncGeneratorFunction]';
}

function expose<B>(engine: BatchEngine, callable: object): B {
  const target = callable as Record<string, unknown>;
  Object.defineProperties(target, {
    name: { get: () => engine.name, configurable: true },
    streaming: { get: () => engine.streaming },
    maxBatchSize: { get: () => engine.maxBatchSize, set: (v: number) => void (engine.maxBatchSize = v) },
    batchWaitTimeoutMs: { get: () => engine.batchWaitTimeoutMs, set: (v: number) => void (engine.batchWaitTimeoutMs = v) },
    maxConcurrentBatches: {
      get: () => engine.maxConcurrentBatches,
      set: (v: number) => void (engine.maxConcurrentBatches = v),
    },
    queueLength: { get: () => engine.queueLength },
    inFlightBatches: { get: () => engine.inFlightBatches },
    closed: { get: () => engine.closed },
  });
  target.stats = () => engine.stats();
  target.on = <E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void) =>
    engine.on(event, listener);
  target.close = (options?: CloseOptions) => engine.close(options);
  return callable as B;
}

/**
 * Creates a batcher: call it with one input and get one result, while concurrent calls share one handler call.
 * An `async function*` handler makes a streaming batcher (see {@link createStreamingBatcher}).
 *
 * @example
 * ```ts
 * const generate = createBatcher(async (prompts: string[], { signal }) => model(prompts, { signal }), {
 *   maxBatchSize: 8,
 *   batchWaitTimeoutMs: 5,
 * });
 * const text = await generate('Once upon a time');
 * await generate.call('Hi', { signal, timeoutMs: 200, priority: 1 });
 * ```
 */
export function createBatcher<I, O>(handler: StreamingBatchHandler<I, O>, options?: BatcherOptions<I>): StreamingBatcher<I, O>;
export function createBatcher<I, O>(handler: BatchHandler<I, O>, options?: BatcherOptions<I>): Batcher<I, O>;
export function createBatcher<I, O>(
  handler: BatchHandler<I, O> | StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): Batcher<I, O> | StreamingBatcher<I, O>;
export function createBatcher<I, O>(
  handler: BatchHandler<I, O> | StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): Batcher<I, O> | StreamingBatcher<I, O> {
  if (isAsyncGeneratorFunction(handler)) return createStreamingBatcher(handler as StreamingBatchHandler<I, O>, options);
  const engine = new BatchEngine(handler as AnyHandler, false, options as BatcherOptions<unknown>);
  const call = (input: I, callOptions?: CallOptions) => engine.call(input, callOptions) as Promise<O>;
  const batcher = expose<Batcher<I, O>>(engine, call);
  (batcher as { call: unknown }).call = call;
  return batcher;
}

/**
 * Creates a streaming batcher: the handler yields steps (one slot per input) and each caller iterates its own
 * values. Use it for handlers that return an async iterable without being an `async function*`.
 *
 * @example
 * ```ts
 * const tokens = createStreamingBatcher(async function* (prompts: string[]) {
 *   for (let step = 0; step < 3; step += 1) yield prompts.map((p) => `${p}#${step}`);
 * });
 * for await (const token of tokens.stream('Once')) console.log(token);
 * ```
 */
export function createStreamingBatcher<I, O>(
  handler: StreamingBatchHandler<I, O>,
  options?: BatcherOptions<I>,
): StreamingBatcher<I, O> {
  const engine = new BatchEngine(handler as AnyHandler, true, options as BatcherOptions<unknown>);
  const call = async (input: I, callOptions?: CallOptions): Promise<O[]> => {
    const values: O[] = [];
    for await (const value of engine.stream(input, callOptions)) values.push(value as O);
    return values;
  };
  const batcher = expose<StreamingBatcher<I, O>>(engine, call);
  (batcher as { call: unknown }).call = call;
  (batcher as { stream: unknown }).stream = (input: I, callOptions?: CallOptions) =>
    engine.stream(input, callOptions) as AsyncIterableIterator<O>;
  return batcher;
}
