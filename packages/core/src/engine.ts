import { type Admission, NO_OPTIONS } from './admission.js';
import type { AnyHandler } from './batch-execution.js';
import type { Dispatcher } from './dispatch.js';
import { buildEngineParts } from './engine-parts.js';
import { Item, Tick, Watch } from './item.js';
import { ItemStream } from './item-stream.js';
import type { ItemWatcher } from './item-watch.js';
import type { Lifecycle } from './lifecycle.js';
import type { Emitter, StatsRecorder } from './metrics.js';
import { NO_TRACER, type ResolvedOptions, type Settings, checkHandler, resolveOptions } from './options.js';
import type { Predictor } from './predictor.js';
import type { QueueSet } from './queues.js';
import type { Refusals } from './refusals.js';
import type { Settlement } from './settlement.js';
import type { BatchTracer } from './tracing.js';
import type { BatcherEvents, BatcherOptions, BatcherStats, CallOptions, CloseOptions } from './types.js';
import { MAX_FINITE, checkInteger, checkNumber } from './util/checks.js';
import { describeValue } from './util/describe-value.js';

const RESOLVED = Promise.resolve();

/**
 * What `call` hands the promise executor on the hot path. `new Promise` runs its executor synchronously, so these
 * are read before anything else can run; one shared executor instead of a closure per call saves two allocations
 * (the closure and its scope) on every call.
 */
let plainEngine: BatchEngine | undefined;
let plainInput: unknown;
function submitPlain(resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
  const engine = plainEngine as BatchEngine;
  const input = plainInput;
  plainEngine = undefined;
  plainInput = undefined;
  engine.submitPlain(input, resolve, reject);
}

function checkInputs(inputs: unknown): void {
  if (!Array.isArray(inputs)) throw new TypeError(`Expected \`inputs\` to be an array, got ${describeValue(inputs)}`);
}

/**
 * One batcher's state and the way a call goes through it: admitted (`Admission`, on the `Predictor`'s estimate),
 * queued (`QueueSet`), dispatched (`Dispatcher`), run (`BatchRunner`) and settled (`Settlement`), its roles built in
 * dependency order by `buildEngineParts`; `Lifecycle` holds the one `closed` state, which only `close()` sets. The
 * facade in `batcher.ts` wraps it in a function.
 */
export class BatchEngine {
  readonly #options: ResolvedOptions<unknown>;
  readonly #settings: Settings;
  readonly #streaming: boolean;
  readonly #lifecycle: Lifecycle;
  readonly #queues: QueueSet;
  readonly #emitter: Emitter;
  readonly #stats: StatsRecorder;
  readonly #predictor: Predictor;
  readonly #refusals: Refusals;
  readonly #settlement: Settlement;
  readonly #admission: Admission;
  readonly #dispatcher: Dispatcher;
  readonly #watcher: ItemWatcher;
  /** The `tracer` option, `undefined` when none was given (then calls capture nothing). */
  readonly #tracer: BatchTracer | undefined;
  #seq = 0;
  #tick: Tick | undefined;
  /**
   * Runs once at the end of each tick that had calls: forgets the tick's clock reading and, in work-conserving
   * mode, dispatches what the tick's calls queued (so a synchronous burst shares one batch without a timer).
   */
  readonly #endTick = (): void => {
    const { now } = this.#tick as Tick;
    this.#tick = undefined;
    if (this.#dispatcher.flushWanted) this.#dispatcher.flush(now);
  };

  constructor(handler: AnyHandler, streaming: boolean, options: BatcherOptions<unknown> | undefined) {
    checkHandler(handler);
    this.#streaming = streaming;
    this.#options = resolveOptions(options);
    const parts = buildEngineParts(handler, streaming, this.#options);
    this.#settings = parts.settings;
    this.#lifecycle = parts.lifecycle;
    this.#queues = parts.queues;
    this.#emitter = parts.emitter;
    this.#stats = parts.stats;
    this.#predictor = parts.predictor;
    this.#refusals = parts.refusals;
    this.#settlement = parts.settlement;
    this.#admission = parts.admission;
    this.#dispatcher = parts.dispatcher;
    this.#watcher = parts.watcher;
    this.#tracer = this.#options.tracer === NO_TRACER ? undefined : this.#options.tracer;
  }

  /**
   * The clock read once per synchronous burst: calls made in the same tick arrived together, and reading the clock
   * for each of them was the largest single cost per item.
   */
  #startTick(): Tick {
    const tick = new Tick(this.#options.clock.now());
    this.#tick = tick;
    // Not queueMicrotask: in Node it allocates an AsyncResource per call.
    void RESOLVED.then(this.#endTick);
    return tick;
  }

  get name(): string {
    return this.#options.name;
  }
  get streaming(): boolean {
    return this.#streaming;
  }
  get maxBatchSize(): number {
    return this.#settings.maxBatchSize;
  }
  set maxBatchSize(value: number) {
    this.#settings.maxBatchSize = checkInteger('maxBatchSize', value, 1);
    this.#dispatcher.pump(this.#options.clock.now());
  }
  get batchWaitTimeoutMs(): number {
    return this.#settings.batchWaitTimeoutMs;
  }
  set batchWaitTimeoutMs(value: number) {
    this.#settings.batchWaitTimeoutMs = checkNumber('batchWaitTimeoutMs', value, 0, MAX_FINITE);
    this.#dispatcher.resetTimer();
    this.#dispatcher.pump(this.#options.clock.now());
  }
  get maxConcurrentBatches(): number {
    return this.#settings.maxConcurrentBatches;
  }
  set maxConcurrentBatches(value: number) {
    this.#settings.maxConcurrentBatches = checkInteger('maxConcurrentBatches', value, 1);
    this.#dispatcher.pump(this.#options.clock.now());
  }
  get queueLength(): number {
    return this.#queues.length;
  }
  get inFlightBatches(): number {
    return this.#dispatcher.inFlight;
  }
  get closed(): boolean {
    return this.#lifecycle.closed;
  }

  stats(): BatcherStats {
    const predictor = this.#predictor;
    const predicted = predictor.latencyMs(this.#options.clock.now());
    const { name, maxLatencyMs } = this.#options;
    return this.#stats.snapshot(
      name,
      this.#queues.length,
      this.#dispatcher.inFlight,
      predictor.estimate(),
      maxLatencyMs,
      predicted,
    );
  }

  on<E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void): () => void {
    return this.#emitter.on(event, listener);
  }

  call(input: unknown, options: CallOptions = NO_OPTIONS): Promise<unknown> {
    if (options === NO_OPTIONS && this.#admission.plain) {
      // oxlint-disable-next-line typescript/no-this-alias -- the shared executor reads the engine from here (see above)
      plainEngine = this;
      plainInput = input;
      return new Promise(submitPlain);
    }
    return new Promise((resolve, reject) => {
      this.#submit(input, options, resolve, reject, undefined);
    });
  }

  stream(input: unknown, options: CallOptions = NO_OPTIONS): ItemStream<unknown> {
    const sink = new ItemStream<unknown>();
    this.#submit(input, options, undefined, undefined, sink);
    return sink;
  }

  /** One call per input, admitted together or refused together (see `Admission.admitGroup`). */
  callAll(inputs: readonly unknown[], options: CallOptions = NO_OPTIONS): Promise<unknown[]> {
    checkInputs(inputs);
    const tick = this.#tick ?? this.#startTick();
    const items: Item[] = [];
    const results = inputs.map(
      (input) =>
        new Promise((resolve, reject) => void items.push(this.#item(input, options, tick, resolve, reject, undefined))),
    );
    this.#submitGroup(items, options, tick.now);
    return Promise.all(results);
  }

  /** {@link stream} for each input, admitted together or refused together. */
  streamAll(inputs: readonly unknown[], options: CallOptions = NO_OPTIONS): Array<ItemStream<unknown>> {
    checkInputs(inputs);
    const tick = this.#tick ?? this.#startTick();
    const sinks = inputs.map(() => new ItemStream<unknown>());
    const items = inputs.map((input, index) => this.#item(input, options, tick, undefined, undefined, sinks[index]));
    this.#submitGroup(items, options, tick.now);
    return sinks;
  }

  close(options: CloseOptions = {}): Promise<void> {
    const drained = this.#lifecycle.close();
    if (options.force === true) {
      const refusal = this.#refusals.closed();
      for (const item of this.#queues.all()) this.#dispatcher.rejectQueued(item, refusal);
    }
    this.#dispatcher.pump(this.#options.clock.now());
    this.#dispatcher.checkIdle();
    return drained;
  }

  /**
   * The hot path: a call without options on a batcher where such calls need no admission but the queue bound (see
   * `Admission.plain`). Kept apart from `#submit`, and small, so that V8 inlines it into `call`; anything else,
   * refusals included, takes the general path. Public only for the module's shared executor.
   */
  submitPlain(input: unknown, resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
    const queues = this.#queues;
    if (this.#lifecycle.closed || queues.length >= this.#options.maxQueueSize) {
      this.#submit(input, NO_OPTIONS, resolve, reject, undefined);
      return;
    }
    const tick = this.#tick ?? this.#startTick();
    const { now } = tick;
    const item = new Item(input, 0, this.#seq++, tick, resolve, reject);
    if (this.#tracer !== undefined) item.trace = this.#tracer.capture();
    this.#dispatcher.arrived(queues.insertPlain(item, now), now);
  }

  #submit(
    input: unknown,
    options: CallOptions,
    resolve: ((value: unknown) => void) | undefined,
    reject: ((error: unknown) => void) | undefined,
    sink: ItemStream<unknown> | undefined,
  ): void {
    const tick = this.#tick ?? this.#startTick();
    const { now } = tick;
    const item = this.#item(input, options, tick, resolve, reject, sink);
    const timeoutMs = this.#timeoutMs(options);
    const admission = this.#admission;
    const decision =
      options === NO_OPTIONS && admission.plain
        ? admission.admitPlain(now)
        : admission.admit(item, options, timeoutMs, now);
    if (decision.admitted) this.#enter(item, timeoutMs, now);
    else this.#settlement.refuse(item, decision);
  }

  #item(
    input: unknown,
    options: CallOptions,
    tick: Tick,
    resolve: ((value: unknown) => void) | undefined,
    reject: ((error: unknown) => void) | undefined,
    sink: ItemStream<unknown> | undefined,
  ): Item {
    const item = new Item(
      input,
      options === NO_OPTIONS ? 0 : (options.priority ?? 0),
      this.#seq++,
      tick,
      resolve,
      reject,
    );
    if (options !== NO_OPTIONS || sink !== undefined || this.#options.timeoutMs !== Number.POSITIVE_INFINITY) {
      item.watch = new Watch(sink, options.signal, options.onDispatch);
    }
    if (this.#tracer !== undefined) item.trace = this.#tracer.capture();
    return item;
  }

  /** The call's deadline: the batcher's `timeoutMs`, or the call's if lower. */
  #timeoutMs(options: CallOptions): number {
    const limitMs = this.#options.timeoutMs;
    return options.timeoutMs === undefined || !(options.timeoutMs < limitMs) ? limitMs : options.timeoutMs;
  }

  #submitGroup(items: Item[], options: CallOptions, now: number): void {
    const [first] = items;
    if (first === undefined) return;
    const timeoutMs = this.#timeoutMs(options);
    const decision = this.#admission.admitGroup(first, items.slice(1), options, timeoutMs, now);
    if (decision.admitted) {
      for (const item of items) this.#enter(item, timeoutMs, now);
      return;
    }
    for (const item of items) this.#settlement.refuse(item, decision);
  }

  /** Queues an admitted item, watching its signal and deadline. */
  #enter(item: Item, timeoutMs: number, now: number): void {
    if (item.watch !== undefined) this.#watcher.watch(item, item.watch, timeoutMs);
    this.#dispatcher.arrived(this.#queues.insert(item, now), now);
  }
}
