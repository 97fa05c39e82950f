import { BatchError, ErrorCode, isBatchError } from './errors.js';
import type { Item, RunningBatch } from './item.js';
import type { LatencyModel } from './latency-model.js';
import { type ResolvedOptions, type Settings, checkCallOptions } from './options.js';
import type { QueueSet } from './queues.js';
import type { CallOptions, OverloadCause, RejectReason } from './types.js';
import { describeValue as describe } from './util/describe-value.js';

/** The options object of calls made without one: `admit` skips the checks for it. */
export const NO_OPTIONS: CallOptions = Object.freeze({});

/**
 * Decides whether an arriving item may wait for a batch, and predicts when queued work completes. An item is
 * refused when the batcher is closed, the call is aborted or invalid, the queue is full, its key or cost cannot be
 * computed, or, once the latency estimate is ready, when its predicted completion exceeds its latency limit or its
 * deadline. After a refusal, `error`, `reason` and `cause` say why (fields, not a returned object, so the admitted
 * path allocates nothing).
 */
export class Admission {
  readonly #options: ResolvedOptions<unknown>;
  readonly #settings: Settings;
  readonly #queues: QueueSet;
  readonly #model: LatencyModel;
  readonly #running: readonly RunningBatch[];
  readonly #batchKey: ((input: unknown) => unknown) | undefined;
  readonly #cost: ((input: unknown) => number) | undefined;
  readonly #plain: boolean;
  closed = false;
  error: unknown;
  reason: RejectReason = ErrorCode.INVALID_INPUT;
  cause: OverloadCause | undefined;

  constructor(
    options: ResolvedOptions<unknown>,
    settings: Settings,
    queues: QueueSet,
    model: LatencyModel,
    running: readonly RunningBatch[],
    batchKey: ((input: unknown) => unknown) | undefined,
    cost: ((input: unknown) => number) | undefined,
  ) {
    this.#options = options;
    this.#settings = settings;
    this.#queues = queues;
    this.#model = model;
    this.#running = running;
    this.#batchKey = batchKey;
    this.#cost = cost;
    this.#plain =
      batchKey === undefined &&
      cost === undefined &&
      options.maxLatencyMs === Number.POSITIVE_INFINITY &&
      options.timeoutMs === Number.POSITIVE_INFINITY;
  }

  /**
   * Whether calls without options can skip everything but the closed and queue-size checks: no `batchKey`, no
   * `cost`, no latency limit, no batcher deadline, and no fairness keys in play.
   */
  get plain(): boolean {
    return this.#plain && !this.#queues.fair;
  }

  /** {@link admit} for a call without options when {@link plain}. */
  admitPlain(now: number): boolean {
    if (this.closed) return this.#refuse(this.closedError(), ErrorCode.CLOSED);
    if (this.#queues.length >= this.#options.maxQueueSize)
      return this.#refuse(this.#queueFull(now), ErrorCode.QUEUE_FULL);
    return true;
  }

  /** Fills in the item's key, cost, fairness key and deadline; false (with the why) if it must be refused. */
  admit(item: Item, options: CallOptions, timeoutMs: number, now: number): boolean {
    return this.admitGroup(item, undefined, options, timeoutMs, now);
  }

  /**
   * {@link admit} for `first` and the `rest` of a group of calls made together (`callAll`), all or none: the
   * queue bound, the fair share and the latency limit are checked once, for the group's last item, and a refusal
   * refuses every item with the same error.
   */
  admitGroup(
    first: Item,
    rest: readonly Item[] | undefined,
    options: CallOptions,
    timeoutMs: number,
    now: number,
  ): boolean {
    const count = 1 + (rest?.length ?? 0);
    if (options !== NO_OPTIONS) {
      try {
        checkCallOptions(options);
      } catch (error) {
        return this.#refuse(error, ErrorCode.INVALID_INPUT);
      }
    }
    if (this.closed) return this.#refuse(this.closedError(), ErrorCode.CLOSED);
    if (options.signal?.aborted === true) return this.#refuse(options.signal.reason, 'CANCELLED');
    if (this.#queues.length + count > this.#options.maxQueueSize) {
      if (count > this.#options.maxQueueSize) return this.#refuse(this.#groupTooLarge(count), ErrorCode.ITEM_TOO_LARGE);
      return this.#refuse(this.#queueFull(now), ErrorCode.QUEUE_FULL);
    }
    const limitMs =
      options.maxLatencyMs === undefined
        ? this.#options.maxLatencyMs
        : Math.min(options.maxLatencyMs, this.#options.maxLatencyMs);
    let deadlineAt: number | undefined;
    if (limitMs < timeoutMs) deadlineAt = now + limitMs;
    else if (timeoutMs !== Number.POSITIVE_INFINITY) deadlineAt = now + timeoutMs;
    if (!this.#prepare(first, options, deadlineAt, limitMs < timeoutMs)) return false;
    let cost = first.cost;
    if (rest !== undefined) {
      for (const item of rest) {
        if (!this.#prepare(item, options, deadlineAt, limitMs < timeoutMs)) return false;
        cost += item.cost;
      }
    }
    if (this.#queues.fair && !this.#withinFairShare(first.fairnessKey, count)) return false;
    if (deadlineAt === undefined || !this.#model.ready) return true;
    // Nothing queued ahead and a slot free: it goes at once, so it makes no one wait, and refusing it on its own
    // predicted run time would stall the estimate on the slow batches of a past overload (nothing would run to
    // correct it, and every request would be refused forever).
    if (this.#queues.length === 0 && this.#running.length < this.#settings.maxConcurrentBatches) return true;
    // Admitted on a pessimistic reading of the estimate (as much slower as batch times have been straying from the
    // fit), so that an item let in near its limit is not answered late when the next batches run slow; the queue
    // refuses early on the optimistic reading (`Dispatcher`), and the band between the two keeps an estimate that
    // only wobbles from refusing the items it admitted after they waited.
    const predictedMs = this.admissionMs(cost, first.fairnessKey, first.priority, now, count);
    if (predictedMs <= limitMs && predictedMs <= timeoutMs) return true;
    const cause: OverloadCause = timeoutMs < limitMs ? 'deadline' : 'latency';
    return this.#refuse(this.overloaded(cause, predictedMs, Math.min(limitMs, timeoutMs)), ErrorCode.OVERLOADED, cause);
  }

  /** An item's fairness key, batch key, cost and deadline; false (with the why) if its key or cost fails. */
  #prepare(item: Item, options: CallOptions, deadlineAt: number | undefined, latencyBound: boolean): boolean {
    if (options.fairnessKey !== undefined) item.fairnessKey = options.fairnessKey;
    if ((this.#batchKey !== undefined || this.#cost !== undefined) && !this.#measure(item)) return false;
    item.deadlineAt = deadlineAt;
    item.latencyBound = latencyBound;
    return true;
  }

  closedError(): BatchError {
    return new BatchError(ErrorCode.CLOSED, `Batcher "${this.#options.name}" is closed`, {
      retryAfterSeconds: this.#options.retryAfterSeconds,
    });
  }

  /**
   * The `OVERLOADED` error: what was predicted against which limit (for `fair-share`: the items its key has queued
   * against its share), and when to retry.
   */
  overloaded(cause: OverloadCause, predictedMs: number, limitMs: number): BatchError {
    const predicted = Math.ceil(predictedMs);
    const what =
      cause === 'fair-share'
        ? `this client's share of the queue is used up (${predicted} items queued for it, share ${Math.floor(limitMs)})`
        : `the predicted wait of ${predicted} ms exceeds ${cause === 'deadline' ? 'the deadline' : 'maxLatencyMs'} (${Math.floor(limitMs)} ms)`;
    return new BatchError(ErrorCode.OVERLOADED, `Batcher "${this.#options.name}" is overloaded: ${what}`, {
      // By then the backlog ahead has drained enough for the same request to fit (if no one else came meanwhile).
      retryAfterSeconds: cause === 'fair-share' ? this.#backlogRetryAfter() : this.#retryAfter(predictedMs, limitMs),
      details:
        cause === 'fair-share'
          ? { cause, queued: predicted, share: Math.floor(limitMs) }
          : { cause, predictedMs: predicted, limitMs: Math.floor(limitMs) },
    });
  }

  /** {@link predictMs} read at the slow end of the band the fit's recent error allows: what admission compares. */
  admissionMs(cost: number, fairnessKey: unknown, priority: number, now: number, items = 1): number {
    return this.predictMs(cost, fairnessKey, priority, now, items) * (1 + this.#model.spread);
  }

  /**
   * Milliseconds from `now` until an item of this cost, fairness key and priority would have its result: the work
   * that would be dispatched before it (all of it; with fairness keys, each other key's work up to this key's own;
   * with priorities, the work of equal or higher priority), cut into batches, run after the running batches on
   * `maxConcurrentBatches` slots. `items` arrive together (a group of that total cost): when the last one is done.
   */
  predictMs(cost: number, fairnessKey: unknown, priority: number, now: number, items = 1): number {
    const queues = this.#queues;
    let costAhead = queues.cost;
    let itemsAhead = queues.length;
    if (queues.fair) {
      return this.fairCompletionMs((queues.tallies.get(fairnessKey)?.cost ?? 0) + cost, fairnessKey, now, items);
    } else if (queues.prioritized > 0 || priority !== 0) {
      costAhead = 0;
      itemsAhead = 0;
      for (const queue of queues.queues()) {
        for (const item of queue.items) {
          if (item.priority < priority) break; // queues are ordered by priority
          costAhead += item.cost;
          itemsAhead += 1;
        }
      }
    }
    return this.completionMs(costAhead + cost, itemsAhead + items, now);
  }

  /**
   * Milliseconds until the work of `fairnessKey` up to `ownCost` is done when batches share work fairly: every other
   * key's queued work counts up to `ownCost` too. `extra` items are not queued yet (the arriving one).
   */
  fairCompletionMs(ownCost: number, fairnessKey: unknown, now: number, extra = 0): number {
    const own = this.#queues.tallies.get(fairnessKey);
    let cost = ownCost;
    let items = extra + (own === undefined || own.cost <= 0 ? 0 : (own.count * Math.min(ownCost, own.cost)) / own.cost);
    for (const [key, tally] of this.#queues.tallies) {
      if (key === fairnessKey) continue;
      const share = Math.min(tally.cost, ownCost);
      cost += share;
      items += tally.cost > 0 ? (tally.count * share) / tally.cost : tally.count;
    }
    return this.completionMs(cost, Math.max(1, Math.round(items)), now);
  }

  /** Milliseconds until `items` queued items of total `cost`, at the head of the queue, are done. */
  completionMs(cost: number, items: number, now: number): number {
    const model = this.#model;
    const { maxBatchSize, maxConcurrentBatches: slots } = this.#settings;
    const { maxBatchCost } = this.#options;
    let batches = Math.ceil(items / maxBatchSize);
    if (maxBatchCost !== Number.POSITIVE_INFINITY) batches = Math.max(batches, Math.ceil(cost / maxBatchCost));
    // Each other batch key waiting forms batches of its own.
    batches += Math.max(0, this.#queues.keys - 1);
    const workMs = batches * model.predict(cost / batches);
    let busyMs = 0;
    for (const batch of this.#running) busyMs += Math.max(0, model.predict(batch.cost) - (now - batch.startedAt));
    if (slots === 1) return busyMs + workMs;
    // Work spread over the slots, its last batch on one slot: exact for one slot, cautious for several.
    const batchMs = workMs / batches;
    return Math.max(batchMs, (busyMs + workMs) / slots + (batchMs * (slots - 1)) / slots);
  }

  /** `Retry-After` in seconds for a wait predicted at `predictedMs` against `limitMs`: when it would fit. */
  #retryAfter(predictedMs: number, limitMs: number): number {
    // Less a microsecond: floating-point noise in the fit must not add a whole second.
    return Math.max(1, Math.ceil((predictedMs - limitMs - 0.001) / 1000));
  }

  /** Once the estimate is ready, how long the queue takes to drain; before, the configured constant. */
  #backlogRetryAfter(now = this.#options.clock.now()): number {
    if (!this.#model.ready) return this.#options.retryAfterSeconds;
    return this.#retryAfter(this.completionMs(this.#queues.cost, this.#queues.length, now), 0);
  }

  /** A group that no queue of this size could ever hold: retrying cannot help, so it is not `QUEUE_FULL`. */
  #groupTooLarge(count: number): BatchError {
    const { name, maxQueueSize } = this.#options;
    return new BatchError(
      ErrorCode.ITEM_TOO_LARGE,
      `Batcher "${name}" cannot queue ${count} calls at once (maxQueueSize = ${maxQueueSize})`,
      {
        details: { calls: count, maxQueueSize },
      },
    );
  }

  #queueFull(now: number): BatchError {
    const { name, maxQueueSize } = this.#options;
    return new BatchError(ErrorCode.QUEUE_FULL, `Batcher "${name}" queue is full (maxQueueSize = ${maxQueueSize})`, {
      retryAfterSeconds: this.#backlogRetryAfter(now),
    });
  }

  /**
   * With fairness keys, no key may hold more than its share of `maxQueueSize` while others have work waiting;
   * `count` items of `fairnessKey` arrive.
   */
  #withinFairShare(fairnessKey: unknown, count: number): boolean {
    const { tallies } = this.#queues;
    const own = tallies.get(fairnessKey);
    const active = tallies.size + (own === undefined ? 1 : 0);
    if (active <= 1) return true;
    const share = this.#options.maxQueueSize / active;
    const queued = own?.count ?? 0;
    if (queued + count <= share) return true;
    return this.#refuse(this.overloaded('fair-share', queued, share), ErrorCode.OVERLOADED, 'fair-share');
  }

  #measure(item: Item): boolean {
    if (this.#batchKey !== undefined) {
      try {
        item.key = this.#batchKey(item.input);
      } catch (error) {
        return this.#refuse(inputError('batchKey', error), ErrorCode.INVALID_INPUT);
      }
    }
    if (this.#cost === undefined) return true;
    let cost: unknown;
    try {
      cost = this.#cost(item.input);
    } catch (error) {
      return this.#refuse(inputError('cost', error), ErrorCode.INVALID_INPUT);
    }
    if (typeof cost !== 'number' || !Number.isFinite(cost) || cost < 0) {
      // A bad cost is a bug in the caller's cost function, not in the request: it must not look like a 400.
      const error = new TypeError(`Expected \`cost\` to return a finite number >= 0, got ${describe(cost)}`);
      return this.#refuse(error, ErrorCode.HANDLER_ERROR);
    }
    const { maxBatchCost } = this.#options;
    if (cost > maxBatchCost) {
      const error = new BatchError(ErrorCode.ITEM_TOO_LARGE, `Item cost ${cost} exceeds maxBatchCost ${maxBatchCost}`, {
        details: { cost, maxBatchCost },
      });
      return this.#refuse(error, ErrorCode.ITEM_TOO_LARGE);
    }
    item.cost = cost;
    return true;
  }

  #refuse(error: unknown, reason: RejectReason, cause?: OverloadCause): false {
    this.error = error;
    this.reason = reason;
    this.cause = cause;
    return false;
  }
}

function inputError(option: 'batchKey' | 'cost', error: unknown): BatchError {
  if (isBatchError(error)) return error;
  return new BatchError(ErrorCode.INVALID_INPUT, `\`${option}\` failed for this input`, {
    cause: error,
    expose: false,
  });
}
