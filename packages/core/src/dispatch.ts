import { type BatchExecutor, type BatchLifecycle, controllerOf } from './batch-execution.js';
import { type Item, ItemState, RunningBatch } from './item.js';
import type { KeyQueue } from './key-queue.js';
import type { Lifecycle } from './lifecycle.js';
import type { Emitter, StatsRecorder } from './metrics.js';
import type { ResolvedOptions, Settings } from './options.js';
import type { Predictor } from './predictor.js';
import type { QueueSet } from './queues.js';
import type { Refusal, Refusals } from './refusals.js';
import type { Settlement } from './settlement.js';
import { type BatchTracer, batchOutcome, startBatchSpan } from './tracing.js';
import { NO_TRACER } from './options.js';

/** What the dispatcher reads and writes, built before it (see `BatchEngine`'s constructor). */
export interface DispatcherParts {
  readonly options: ResolvedOptions<unknown>;
  readonly settings: Settings;
  readonly queues: QueueSet;
  /** The batches whose handler runs: the dispatcher is the only writer (the predictor reads them). */
  readonly running: RunningBatch[];
  readonly predictor: Predictor;
  readonly refusals: Refusals;
  readonly lifecycle: Lifecycle;
  readonly stats: StatsRecorder;
  readonly emitter: Emitter;
  readonly settlement: Settlement;
}

/**
 * When batches go. Work-conserving by default (`batchWaitTimeoutMs: 0`): while a slot is free, whatever is queued
 * goes at once, a synchronous burst of calls sharing one batch (the engine flushes once per tick); while every slot
 * is busy, arrivals gather and the next batch is formed when a slot frees. With `batchWaitTimeoutMs > 0`, a key's
 * batch also waits for that long after its first item unless it fills up first. Once closed, nothing waits.
 */
export class Dispatcher implements BatchLifecycle {
  readonly #options: ResolvedOptions<unknown>;
  readonly #settings: Settings;
  readonly #queues: QueueSet;
  /**
   * Batches whose handler is still running; their count is the slots taken. An array, not a `Set`: it holds at most
   * `maxConcurrentBatches` batches, and adding to and deleting from a set cost a measurable share of each batch.
   */
  readonly #running: RunningBatch[];
  readonly #predictor: Predictor;
  readonly #refusals: Refusals;
  readonly #lifecycle: Lifecycle;
  readonly #stats: StatsRecorder;
  readonly #emitter: Emitter;
  readonly #settlement: Settlement;
  readonly #costed: boolean;
  readonly #executor: BatchExecutor;
  readonly #tracer: BatchTracer | undefined;
  /** An arrival is waiting for the end-of-tick flush (work-conserving mode). */
  flushWanted = false;
  #batchSeq = 0;
  #timer: unknown;
  #timerAt = Number.POSITIVE_INFINITY;
  #pumping = false;

  /**
   * `costed`: whether items have costs of their own (a `cost` option), so a batch's cost must be summed.
   * `executor` builds the batch runner, which tells this dispatcher when a batch's slot frees and when it ends.
   */
  constructor(parts: DispatcherParts, costed: boolean, executor: (lifecycle: BatchLifecycle) => BatchExecutor) {
    this.#options = parts.options;
    this.#settings = parts.settings;
    this.#queues = parts.queues;
    this.#running = parts.running;
    this.#predictor = parts.predictor;
    this.#refusals = parts.refusals;
    this.#lifecycle = parts.lifecycle;
    this.#stats = parts.stats;
    this.#emitter = parts.emitter;
    this.#settlement = parts.settlement;
    this.#costed = costed;
    this.#executor = executor(this);
    this.#tracer = parts.options.tracer === NO_TRACER ? undefined : parts.options.tracer;
  }

  /** Handler calls whose slot is taken. */
  get inFlight(): number {
    return this.#running.length;
  }

  /** After an item joined `queue`. */
  arrived(queue: KeyQueue, now: number): void {
    const settings = this.#settings;
    if (this.#running.length >= settings.maxConcurrentBatches) return; // it joins the batch formed when a slot frees
    if (queue.isFull(settings.maxBatchSize, this.#options.maxBatchCost)) this.pump(now);
    else if (settings.batchWaitTimeoutMs === 0) this.flushWanted = true;
    else if (queue.items.length === 1) this.pump(now); // a new window: arm its timer
  }

  /** The end of the tick the burst arrived in: dispatch what the burst queued. */
  flush(now: number): void {
    this.flushWanted = false;
    if (this.#queues.length > 0) this.pump(now);
  }

  /** Dispatches every ready batch there is room for, then arms the timer for the next window to close. */
  pump(now: number): void {
    // A handler that calls the batcher synchronously re-enters here; the outer loop picks its item up.
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#running.length < this.#settings.maxConcurrentBatches && this.#queues.length > 0) {
        const queue = this.#nextReady(now);
        if (queue === undefined) break;
        this.#dispatch(queue, now);
      }
      if (this.#queues.deadlined > 0 && this.#predictor.ready) this.#refuseLate(now);
      this.armTimer();
    } finally {
      this.#pumping = false;
    }
  }

  /** The ready queue whose head should go first: highest priority, then oldest; no key waits behind another forever. */
  #nextReady(now: number): KeyQueue | undefined {
    const waitMs = this.#closingOr(this.#settings.batchWaitTimeoutMs);
    const { maxBatchSize } = this.#settings;
    let best: KeyQueue | undefined;
    for (const queue of this.#queues.queues()) {
      const ready =
        waitMs === 0 || now - queue.windowStart >= waitMs || queue.isFull(maxBatchSize, this.#options.maxBatchCost);
      if (!ready) continue;
      if (best === undefined) {
        best = queue;
        continue;
      }
      const head = queue.items[0] as Item;
      const bestHead = best.items[0] as Item;
      if (head.priority > bestHead.priority || (head.priority === bestHead.priority && head.seq < bestHead.seq))
        best = queue;
    }
    return best;
  }

  #closingOr(waitMs: number): number {
    return this.#lifecycle.closed ? 0 : waitMs;
  }

  armTimer(): void {
    let at = Number.POSITIVE_INFINITY;
    const waitMs = this.#closingOr(this.#settings.batchWaitTimeoutMs);
    if (waitMs > 0 && this.#running.length < this.#settings.maxConcurrentBatches) {
      for (const queue of this.#queues.queues()) at = Math.min(at, queue.windowStart + waitMs);
    }
    if (at === this.#timerAt) return;
    const { clock } = this.#options;
    if (this.#timer !== undefined) clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = at;
    if (at === Number.POSITIVE_INFINITY) return;
    this.#timer = clock.setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAt = Number.POSITIVE_INFINITY;
        this.pump(clock.now());
      },
      Math.max(0, at - clock.now()),
    );
  }

  /** Forgets the armed timer, so the next `armTimer` re-arms it (after `batchWaitTimeoutMs` changed). */
  resetTimer(): void {
    this.#timerAt = Number.NaN;
  }

  #dispatch(queue: KeyQueue, now: number): void {
    const items = this.#queues.take(queue, this.#settings.maxBatchSize, this.#options.maxBatchCost);
    let cost = items.length;
    if (this.#costed) {
      cost = 0;
      for (const item of items) cost += item.cost;
    }
    // A packed array, filled below (not `new Array(n)`: a holey array slows down every handler that maps it).
    const inputs: unknown[] = [];
    const batch = new RunningBatch(++this.#batchSeq, queue.key, items, inputs, cost, now);
    this.#running.push(batch);
    const { maxBatchSize } = this.#settings;
    this.#stats.recordBatch(items.length, maxBatchSize);
    const queueTimesMs: number[] | undefined = this.#emitter.has('batchStart') ? [] : undefined;
    // Queue waits summed per batch (n·now − Σ arrivals), not added one by one: this loop runs for every item.
    let arrivals = 0;
    let oldest = now;
    for (const item of items) {
      item.state = ItemState.Running;
      item.batch = batch;
      inputs.push(item.input);
      const { enqueuedAt } = item;
      arrivals += enqueuedAt;
      if (enqueuedAt < oldest) oldest = enqueuedAt;
      if (item.watch !== undefined || queueTimesMs !== undefined)
        this.#dispatched(item, batch, now - enqueuedAt, queueTimesMs);
    }
    this.#stats.queueWait.addMany(items.length, Math.max(0, items.length * now - arrivals), now - oldest);
    if (this.#tracer !== undefined)
      batch.span = startBatchSpan(this.#tracer, this.#options.name, batch, maxBatchSize, now);
    if (queueTimesMs !== undefined) {
      this.#emitter.emit('batchStart', {
        batchId: batch.id,
        batchSize: items.length,
        maxBatchSize,
        key: queue.key,
        queueTimesMs,
      });
    }
    const { executionTimeoutMs } = this.#options;
    if (executionTimeoutMs !== Number.POSITIVE_INFINITY) {
      batch.timer = this.#options.clock.setTimeout(() => {
        this.#executor.timeOut(batch, executionTimeoutMs);
        // The slot is freed now: a handler that ignores its signal must not stall every later batch.
        this.finish(batch);
      }, executionTimeoutMs);
    }
    const { span } = batch;
    if (span?.enter === undefined) void this.#executor.run(batch);
    else span.enter(() => void this.#executor.run(batch));
  }

  /** The per-item part of a dispatch that only items with `onDispatch`, or a `batchStart` listener, need. */
  #dispatched(item: Item, batch: RunningBatch, queueTimeMs: number, queueTimesMs: number[] | undefined): void {
    queueTimesMs?.push(queueTimeMs);
    const onDispatch = item.watch?.onDispatch;
    if (onDispatch === undefined) return;
    try {
      onDispatch({ batchId: batch.id, batchSize: batch.items.length, queueTimeMs, key: batch.key });
    } catch (error) {
      this.#settlement.fail(item, error);
    }
  }

  /** Frees the batch's concurrency slot, feeds the estimate, and dispatches what is ready; the first call counts. */
  release(batch: RunningBatch): void {
    if (batch.endedAt !== undefined) return;
    const { clock } = this.#options;
    const now = clock.now();
    batch.endedAt = now;
    if (batch.timer !== undefined) clock.clearTimeout(batch.timer);
    const running = this.#running;
    const index = running.indexOf(batch);
    running[index] = running[running.length - 1] as RunningBatch;
    running.pop();
    if (!batch.broken) this.#predictor.record(batch.cost, now - batch.startedAt);
    this.pump(now);
  }

  finish(batch: RunningBatch): void {
    if (batch.finished) return;
    batch.finished = true;
    this.release(batch);
    const executionMs = (batch.endedAt as number) - batch.startedAt;
    this.#stats.execution.add(executionMs);
    batch.span?.end(batchOutcome(batch.broken, batch.failed, batch.abandoned, executionMs));
    if (this.#emitter.has('batchEnd')) {
      const { id: batchId, items, key, failed } = batch;
      this.#emitter.emit('batchEnd', { batchId, batchSize: items.length, key, executionMs, failed });
    }
    this.checkIdle();
  }

  /** Tells the lifecycle when nothing is queued and no batch runs (what a pending `close()` waits for). */
  checkIdle(): void {
    if (this.#queues.length === 0 && this.#running.length === 0) this.#lifecycle.idle();
  }

  /** Takes a waiting item out and settles it with the refusal. */
  rejectQueued(item: Item, refusal: Refusal): void {
    this.#queues.remove(item);
    this.#settlement.refuse(item, refusal);
    this.armTimer();
    this.checkIdle();
  }

  /** Settles a running item before its batch ends; the handler's signal aborts once no item still wants a result. */
  settleEarly(item: Item, refusal: Refusal): void {
    this.#settlement.refuse(item, refusal);
    const { error } = refusal;
    const batch = item.batch as RunningBatch;
    batch.abandoned += 1;
    if (batch.open === 0) {
      const controller = controllerOf(batch);
      if (!controller.signal.aborted) controller.abort(error);
    }
  }

  /**
   * Refuses, now, the queued items the predictor says will miss their deadline or their `maxLatencyMs` (the model
   * slowed down since they were admitted), instead of answering them late: their clients can retry elsewhere while
   * there is still time.
   */
  #refuseLate(now: number): void {
    for (const [item, predictedMs] of this.#predictor.late(now)) {
      const cause = item.latencyBound ? 'latency' : 'deadline';
      // The limit as the caller set it (from its arrival), against the wait predicted from its arrival too.
      const waitedMs = now - item.enqueuedAt;
      const limitMs = (item.deadlineAt as number) - item.enqueuedAt;
      this.rejectQueued(item, this.#refusals.overloaded(cause, waitedMs + predictedMs, limitMs));
    }
  }
}
