import { BatchError, ErrorCode, isBatchError } from './errors.js';
import type { Item } from './item.js';
import type { Lifecycle } from './lifecycle.js';
import { type ResolvedOptions, checkCallOptions } from './options.js';
import type { Predictor } from './predictor.js';
import type { QueueSet } from './queues.js';
import { ADMITTED, type Decision, Refusal, type Refusals } from './refusals.js';
import type { CallOptions, OverloadCause } from './types.js';
import { describeValue as describe } from './util/describe-value.js';

/** The options object of calls made without one: `admit` skips the checks for it. */
export const NO_OPTIONS: CallOptions = Object.freeze({});

/**
 * Decides whether an arriving item may wait for a batch, and returns the decision: {@link ADMITTED}, or a
 * {@link Refusal} saying why not. An item is refused when the batcher is closed, the call is aborted or invalid,
 * the queue is full, its key or cost cannot be computed, or, once the latency estimate is ready, when the
 * predictor puts its completion past its latency limit or its deadline.
 */
export class Admission {
  readonly #options: ResolvedOptions<unknown>;
  readonly #queues: QueueSet;
  readonly #predictor: Predictor;
  readonly #refusals: Refusals;
  readonly #lifecycle: Lifecycle;
  readonly #batchKey: ((input: unknown) => unknown) | undefined;
  readonly #cost: ((input: unknown) => number) | undefined;
  readonly #plain: boolean;
  /**
   * Takes a queued item out and refuses it (the dispatcher's `rejectQueued`, set once it exists): how a key far
   * below its fair share makes room in a queue another key filled.
   */
  evict: ((item: Item, refusal: Refusal) => void) | undefined = undefined;

  constructor(
    options: ResolvedOptions<unknown>,
    queues: QueueSet,
    predictor: Predictor,
    refusals: Refusals,
    lifecycle: Lifecycle,
    batchKey: ((input: unknown) => unknown) | undefined,
    cost: ((input: unknown) => number) | undefined,
  ) {
    this.#options = options;
    this.#queues = queues;
    this.#predictor = predictor;
    this.#refusals = refusals;
    this.#lifecycle = lifecycle;
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
  admitPlain(now: number): Decision {
    if (this.#lifecycle.closed) return this.#refusals.closed();
    if (this.#queues.length >= this.#options.maxQueueSize) return this.#refusals.queueFull(now);
    return ADMITTED;
  }

  /** Fills in the item's key, cost, fairness key and deadline, or says why it must be refused. */
  admit(item: Item, options: CallOptions, timeoutMs: number, now: number): Decision {
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
  ): Decision {
    const count = 1 + (rest?.length ?? 0);
    if (options !== NO_OPTIONS) {
      try {
        checkCallOptions(options);
      } catch (error) {
        return new Refusal(error, ErrorCode.INVALID_INPUT);
      }
    }
    if (this.#lifecycle.closed) return this.#refusals.closed();
    if (options.signal?.aborted === true) return new Refusal(options.signal.reason, 'CANCELLED');
    const { maxQueueSize } = this.#options;
    if (this.#queues.length + count > maxQueueSize) {
      if (count > maxQueueSize) return this.#refusals.groupTooLarge(count);
      // A full queue is no reason to refuse a key below its fair share: another key's latest items make room.
      if (!this.#queues.fair || !this.#makeRoom(options.fairnessKey, count)) return this.#refusals.queueFull(now);
    }
    const limitMs =
      options.maxLatencyMs === undefined
        ? this.#options.maxLatencyMs
        : Math.min(options.maxLatencyMs, this.#options.maxLatencyMs);
    let deadlineAt: number | undefined;
    if (limitMs < timeoutMs) deadlineAt = now + limitMs;
    else if (timeoutMs !== Number.POSITIVE_INFINITY) deadlineAt = now + timeoutMs;
    let refusal = this.#prepare(first, options, deadlineAt, limitMs < timeoutMs);
    if (refusal !== undefined) return refusal;
    let cost = first.cost;
    if (rest !== undefined) {
      for (const item of rest) {
        refusal = this.#prepare(item, options, deadlineAt, limitMs < timeoutMs);
        if (refusal !== undefined) return refusal;
        cost += item.cost;
      }
    }
    if (this.#queues.fair) {
      refusal = this.#beyondFairShare(first.fairnessKey, count);
      if (refusal !== undefined) return refusal;
    }
    const predictor = this.#predictor;
    if (deadlineAt === undefined || !predictor.ready || predictor.runsAtOnce()) return ADMITTED;
    // Admitted on a pessimistic reading of the estimate (as much slower as batch times have been straying from the
    // fit), so that an item let in near its limit is not answered late when the next batches run slow; the queue
    // refuses early on the optimistic reading (`Predictor.late`), and the band between the two keeps an estimate
    // that only wobbles from refusing the items it admitted after they waited.
    const predictedMs = predictor.admissionMs(cost, first.fairnessKey, first.priority, now, count);
    if (predictedMs <= limitMs && predictedMs <= timeoutMs) return ADMITTED;
    const cause: OverloadCause = timeoutMs < limitMs ? 'deadline' : 'latency';
    return this.#refusals.overloaded(cause, predictedMs, Math.min(limitMs, timeoutMs));
  }

  /** Sets an item's fairness key, batch key, cost and deadline; a refusal if its key or cost fails. */
  #prepare(
    item: Item,
    options: CallOptions,
    deadlineAt: number | undefined,
    latencyBound: boolean,
  ): Refusal | undefined {
    if (options.fairnessKey !== undefined) item.fairnessKey = options.fairnessKey;
    if (this.#batchKey !== undefined || this.#cost !== undefined) {
      const refusal = this.#measure(item);
      if (refusal !== undefined) return refusal;
    }
    item.deadlineAt = deadlineAt;
    item.latencyBound = latencyBound;
    return undefined;
  }

  /**
   * With fairness keys, no key may hold more than its share of `maxQueueSize` while others have work waiting;
   * `count` items of `fairnessKey` arrive.
   */
  #beyondFairShare(fairnessKey: unknown, count: number): Refusal | undefined {
    const { tallies } = this.#queues;
    const own = tallies.get(fairnessKey);
    const active = tallies.size + (own === undefined ? 1 : 0);
    if (active <= 1) return undefined;
    const share = this.#options.maxQueueSize / active;
    const queued = own?.count ?? 0;
    if (queued + count <= share) return undefined;
    return this.#refusals.overloaded('fair-share', queued, share);
  }

  /**
   * With fairness keys and a full queue: when `count` items of `fairnessKey` fit its share of `maxQueueSize`, the
   * most recently queued items of the key holding the most (beyond its own share, which it keeps) are refused
   * (`OVERLOADED`, cause `fair-share`) to make room, and `true` is returned; else nothing changes.
   */
  #makeRoom(fairnessKey: unknown, count: number): boolean {
    const evict = this.evict;
    if (evict === undefined) return false;
    const { tallies } = this.#queues;
    const own = tallies.get(fairnessKey)?.count ?? 0;
    const active = tallies.size + (tallies.has(fairnessKey) ? 0 : 1);
    const share = this.#options.maxQueueSize / active;
    if (own + count > share) return false;
    let heaviest: unknown;
    let most = 0;
    for (const [key, tally] of tallies) {
      if (key !== fairnessKey && tally.count > most) {
        heaviest = key;
        most = tally.count;
      }
    }
    const needed = this.#queues.length + count - this.#options.maxQueueSize;
    if (most - needed < share) return false;
    const latest: Item[] = [];
    for (const queue of this.#queues.queues()) {
      for (const item of queue.items) if (item.fairnessKey === heaviest) latest.push(item);
    }
    latest.sort((a, b) => b.seq - a.seq);
    const refusal = this.#refusals.overloaded('fair-share', most, share);
    for (const item of latest.slice(0, needed)) evict(item, refusal);
    return true;
  }

  #measure(item: Item): Refusal | undefined {
    if (this.#batchKey !== undefined) {
      try {
        item.key = this.#batchKey(item.input);
      } catch (error) {
        return new Refusal(inputError('batchKey', error), ErrorCode.INVALID_INPUT);
      }
    }
    if (this.#cost === undefined) return undefined;
    let cost: unknown;
    try {
      cost = this.#cost(item.input);
    } catch (error) {
      return new Refusal(inputError('cost', error), ErrorCode.INVALID_INPUT);
    }
    if (typeof cost !== 'number' || !Number.isFinite(cost) || cost < 0) {
      // A bad cost is a bug in the caller's cost function, not in the request: it must not look like a 400.
      const error = new TypeError(`Expected \`cost\` to return a finite number >= 0, got ${describe(cost)}`);
      return new Refusal(error, ErrorCode.HANDLER_ERROR);
    }
    const { maxBatchCost } = this.#options;
    if (cost > maxBatchCost) {
      const error = new BatchError(ErrorCode.ITEM_TOO_LARGE, `Item cost ${cost} exceeds maxBatchCost ${maxBatchCost}`, {
        details: { cost, maxBatchCost },
      });
      return new Refusal(error, ErrorCode.ITEM_TOO_LARGE);
    }
    item.cost = cost;
    return undefined;
  }
}

function inputError(option: 'batchKey' | 'cost', error: unknown): BatchError {
  if (isBatchError(error)) return error;
  return new BatchError(ErrorCode.INVALID_INPUT, `\`${option}\` failed for this input`, {
    cause: error,
    expose: false,
  });
}
