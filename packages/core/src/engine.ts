import { Admission, NO_OPTIONS } from './admission.js';
import { type AnyHandler, BatchRunner } from './batch-execution.js';
import { Dispatcher } from './dispatch.js';
import { BatchError, ErrorCode } from './errors.js';
import { Item, ItemState, Tick, Watch } from './item.js';
import { ItemStream } from './item-stream.js';
import { LatencyModel } from './latency-model.js';
import { Emitter, StatsRecorder } from './metrics.js';
import { DEFAULT_OPTIONS, type ResolvedOptions, Settings, checkHandler, resolveOptions } from './options.js';
import { QueueSet } from './queues.js';
import { Settlement } from './settlement.js';
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

/** One options object for every item's abort listener, rather than a literal per call. */
const ONCE = Object.freeze({ once: true });

/**
 * One batcher's state and the way a call goes through it: admitted (`Admission`), queued (`QueueSet`), dispatched
 * (`Dispatcher`), run (`BatchRunner`) and settled (`Settlement`). The facade in `batcher.ts` wraps it in a function.
 */
export class BatchEngine {
  readonly #options: ResolvedOptions<unknown>;
  readonly #settings: Settings;
  readonly #streaming: boolean;
  readonly #queues = new QueueSet();
  readonly #model = new LatencyModel();
  readonly #emitter = new Emitter();
  readonly #stats = new StatsRecorder();
  readonly #settlement: Settlement;
  readonly #admission: Admission;
  readonly #dispatcher: Dispatcher;
  #seq = 0;
  #closed = false;
  #drained: Promise<void> | undefined;
  #resolveDrained: (() => void) | undefined;
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
  readonly #checkDrained = (): void => {
    if (this.#resolveDrained !== undefined && this.#queues.length === 0 && this.#dispatcher.inFlight === 0) {
      this.#resolveDrained();
      this.#resolveDrained = undefined;
    }
  };

  constructor(handler: AnyHandler, streaming: boolean, options: BatcherOptions<unknown> | undefined) {
    checkHandler(handler);
    this.#streaming = streaming;
    const resolved = resolveOptions(options);
    this.#options = resolved;
    this.#settings = new Settings(resolved);
    const batchKey = resolved.batchKey === DEFAULT_OPTIONS.batchKey ? undefined : resolved.batchKey;
    const cost = resolved.cost === DEFAULT_OPTIONS.cost ? undefined : resolved.cost;
    this.#settlement = new Settlement(resolved.clock, this.#stats, this.#emitter);
    const dispatcher = new Dispatcher(
      resolved,
      this.#settings,
      this.#queues,
      this.#stats,
      this.#emitter,
      this.#settlement,
      this.#model,
      cost !== undefined,
      this.#checkDrained,
    );
    this.#admission = new Admission(
      resolved,
      this.#settings,
      this.#queues,
      this.#model,
      dispatcher.running,
      batchKey,
      cost,
    );
    dispatcher.admission = this.#admission;
    dispatcher.runner = new BatchRunner(handler, streaming, resolved.onBatchError, this.#settlement, dispatcher);
    this.#dispatcher = dispatcher;
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
    return this.#closed;
  }

  stats(): BatcherStats {
    const now = this.#options.clock.now();
    const idle = this.#queues.length === 0 && this.#dispatcher.inFlight === 0;
    const predicted = !this.#model.ready ? Number.NaN : idle ? 0 : this.#admission.admissionMs(1, undefined, 0, now);
    const { name, maxLatencyMs } = this.#options;
    return this.#stats.snapshot(
      name,
      this.#queues.length,
      this.#dispatcher.inFlight,
      this.#model.snapshot(),
      maxLatencyMs,
      predicted,
    );
  }

  on<E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void): () => void {
    return this.#emitter.on(event, listener);
  }

  call(input: unknown, options: CallOptions = NO_OPTIONS): Promise<unknown> {
    if (options === NO_OPTIONS && this.#admission.plain) {
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
    this.#closed = true;
    this.#admission.closed = true;
    this.#dispatcher.closing = true;
    if (options.force === true) {
      const error = this.#admission.closedError();
      for (const item of this.#queues.all()) this.#dispatcher.rejectQueued(item, error, ErrorCode.CLOSED);
    }
    this.#drained ??= new Promise((resolve) => {
      this.#resolveDrained = resolve;
    });
    this.#dispatcher.pump(this.#options.clock.now());
    this.#checkDrained();
    return this.#drained;
  }

  /**
   * The hot path: a call without options on a batcher where such calls need no admission but the queue bound (see
   * `Admission.plain`). Kept apart from `#submit`, and small, so that V8 inlines it into `call`; anything else,
   * refusals included, takes the general path. Public only for the module's shared executor.
   */
  submitPlain(input: unknown, resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
    const queues = this.#queues;
    if (this.#closed || queues.length >= this.#options.maxQueueSize) {
      this.#submit(input, NO_OPTIONS, resolve, reject, undefined);
      return;
    }
    const tick = this.#tick ?? this.#startTick();
    const { now } = tick;
    this.#dispatcher.arrived(queues.insertPlain(new Item(input, 0, this.#seq++, tick, resolve, reject), now), now);
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
    const admitted =
      options === NO_OPTIONS && admission.plain
        ? admission.admitPlain(now)
        : admission.admit(item, options, timeoutMs, now);
    if (admitted) this.#enter(item, timeoutMs, now);
    else this.#settlement.settle(item, undefined, admission.error, admission.reason, admission.cause);
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
    const admission = this.#admission;
    if (admission.admitGroup(first, items.slice(1), options, timeoutMs, now)) {
      for (const item of items) this.#enter(item, timeoutMs, now);
      return;
    }
    // Read once: a `reject` listener may call the batcher while the items settle, and refill these fields.
    const { error, reason, cause } = admission;
    for (const item of items) this.#settlement.settle(item, undefined, error, reason, cause);
  }

  /** Queues an admitted item, watching its signal and deadline. */
  #enter(item: Item, timeoutMs: number, now: number): void {
    if (item.watch !== undefined) this.#watch(item, item.watch, timeoutMs);
    this.#dispatcher.arrived(this.#queues.insert(item, now), now);
  }

  /**
   * Subscribes to the item's cancellation and deadline. Kept out of `#submit` because closures there would make
   * every call allocate their scope, even calls with no signal and no deadline.
   */
  #watch(item: Item, watch: Watch, timeoutMs: number): void {
    const { sink, signal } = watch;
    if (sink !== undefined)
      sink.onCancel = () => this.#cancel(item, new DOMException('The stream consumer stopped', 'AbortError'));
    if (signal !== undefined) {
      watch.onAbort = () => this.#cancel(item, signal.reason);
      signal.addEventListener('abort', watch.onAbort, ONCE);
    }
    if (timeoutMs !== Number.POSITIVE_INFINITY) {
      watch.timer = this.#options.clock.setTimeout(() => this.#expire(item, timeoutMs), timeoutMs);
    }
  }

  /** Called when the caller aborts or stops consuming: queued, the item leaves; running, it settles now. */
  #cancel(item: Item, reason: unknown): void {
    if (item.state === ItemState.Queued) this.#dispatcher.rejectQueued(item, reason, 'CANCELLED');
    else if (item.state === ItemState.Running) this.#dispatcher.settleEarly(item, reason, 'CANCELLED');
  }

  #expire(item: Item, timeoutMs: number): void {
    (item.watch as Watch).timer = undefined;
    const where = item.state === ItemState.Queued ? 'queued' : 'running';
    const error = new BatchError(ErrorCode.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded while ${where}`);
    if (item.state === ItemState.Queued) this.#dispatcher.rejectQueued(item, error, ErrorCode.DEADLINE_EXCEEDED);
    else if (item.state === ItemState.Running) this.#dispatcher.settleEarly(item, error, ErrorCode.DEADLINE_EXCEEDED);
  }
}
