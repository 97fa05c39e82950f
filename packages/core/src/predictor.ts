import type { Item, RunningBatch } from './item.js';
import { LatencyModel } from './latency-model.js';
import type { ResolvedOptions, Settings } from './options.js';
import type { QueueSet } from './queues.js';
import type { LatencyEstimate } from './types.js';

/** A queued item the estimate puts past its limit, with the milliseconds predicted from now to its result. */
export type LateItem = readonly [item: Item, predictedMs: number];

/**
 * The one place completion times are predicted: the latency model (fed each finished batch) read against the queue
 * state (the queued work by key, fairness key and priority, and the running batches on `maxConcurrentBatches`
 * slots). Admission asks it how long an arriving item would take ({@link admissionMs}), the dispatcher which queued
 * items will now be late ({@link late}), and `stats()` what an item arriving now would be told ({@link latencyMs}).
 */
export class Predictor {
  readonly #options: ResolvedOptions<unknown>;
  readonly #settings: Settings;
  readonly #queues: QueueSet;
  readonly #running: readonly RunningBatch[];
  readonly #model = new LatencyModel();

  /** `running`: the batches whose handler runs, written by the dispatcher only. */
  constructor(
    options: ResolvedOptions<unknown>,
    settings: Settings,
    queues: QueueSet,
    running: readonly RunningBatch[],
  ) {
    this.#options = options;
    this.#settings = settings;
    this.#queues = queues;
    this.#running = running;
  }

  /** Whether enough batches ran for predictions to be trusted; until then only `maxQueueSize` bounds the queue. */
  get ready(): boolean {
    return this.#model.ready;
  }

  /** Feeds the model one finished batch (not one that failed as a whole or timed out: its time says nothing). */
  record(cost: number, ms: number): void {
    this.#model.add(cost, ms);
  }

  estimate(): LatencyEstimate {
    return this.#model.snapshot();
  }

  /**
   * Whether an item arriving now would be dispatched at once (nothing queued ahead, a slot free): it makes no one
   * wait, and refusing it on its own predicted run time would stall the estimate on the slow batches of a past
   * overload (nothing would run to correct it, and every request would be refused forever).
   */
  runsAtOnce(): boolean {
    return this.#queues.length === 0 && this.#running.length < this.#settings.maxConcurrentBatches;
  }

  /**
   * What `stats()` reports as `predictedLatencyMs`: {@link admissionMs} for one item of cost 1 arriving now; `NaN`
   * until the estimate is ready, 0 while nothing is queued or running.
   */
  latencyMs(now: number): number {
    if (!this.#model.ready) return Number.NaN;
    if (this.#queues.length === 0 && this.#running.length === 0) return 0;
    return this.admissionMs(1, undefined, 0, now);
  }

  /**
   * {@link predictMs} read at the slow end of the band the fit's recent error allows: what admission compares, so
   * that an item let in near its limit is not answered late when the next batches run slow.
   */
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
    if (queues.fair) {
      return this.#fairCompletionMs((queues.tallies.get(fairnessKey)?.cost ?? 0) + cost, fairnessKey, now, items);
    }
    let costAhead = queues.cost;
    let itemsAhead = queues.length;
    if (queues.prioritized > 0 || priority !== 0) {
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

  /** Milliseconds until the whole queue is done: what `QUEUE_FULL`'s `Retry-After` says. */
  backlogMs(now: number): number {
    return this.completionMs(this.#queues.cost, this.#queues.length, now);
  }

  /**
   * The queued items with a deadline that the estimate now puts past it, even read at the fast end of its band.
   * Admission let items in up to their limit on the estimate of the moment, so an estimate that merely wobbles
   * (batch times on a shared CPU stray by ±10%) would refuse the ones admitted last after they waited most of their
   * time; those would rather be answered a little late. An item is late here only if it would be late even if
   * batches ran as much faster than the fit as they have been straying from it (see `LatencyModel.spread`): a model
   * that really slowed down still has its queue refused early.
   */
  late(now: number): LateItem[] {
    const late: LateItem[] = [];
    const { fair } = this.#queues;
    const optimism = 1 - this.#model.spread;
    for (const queue of this.#queues.queues()) {
      let cost = 0;
      let count = 0;
      // With fairness keys, an item waits for its own key's earlier work and the other keys' up to as much.
      const own = fair ? new Map<unknown, number>() : undefined;
      for (const item of queue.items) {
        cost += item.cost;
        count += 1;
        const mine = own === undefined ? 0 : (own.get(item.fairnessKey) ?? 0) + item.cost;
        own?.set(item.fairnessKey, mine);
        const { deadlineAt } = item;
        if (deadlineAt === undefined) continue;
        const predictedMs =
          own === undefined ? this.completionMs(cost, count, now) : this.#fairCompletionMs(mine, item.fairnessKey, now);
        if (now + predictedMs * optimism > deadlineAt) late.push([item, predictedMs]);
      }
    }
    return late;
  }

  /**
   * Milliseconds until the work of `fairnessKey` up to `ownCost` is done when batches share work fairly: every other
   * key's queued work counts up to `ownCost` too. `extra` items are not queued yet (the arriving one).
   */
  #fairCompletionMs(ownCost: number, fairnessKey: unknown, now: number, extra = 0): number {
    const own = this.#queues.tallies.get(fairnessKey);
    let cost = ownCost;
    let items = extra + (own === undefined || own.cost <= 0 ? 0 : (own.count * Math.min(ownCost, own.cost)) / own.cost);
    for (const [key, tally] of this.#queues.tallies) {
      if (key === fairnessKey) continue;
      const share = Math.min(tally.cost, ownCost);
      cost += share;
      items += tally.cost > 0 ? (tally.count * share) / tally.cost : tally.count;
    }
    return this.completionMs(cost, Math.max(1, Math.round(items)), now, true);
  }

  /**
   * Milliseconds until `items` queued items of total `cost`, at the head of the queue, are done. `placed` (fair
   * queuing): also place the batches one by one on the slots as the running batches end ({@link slotCompletionMs})
   * and take the sooner answer, so that a key with little work ahead of it is predicted to start when the first
   * slot frees, not when the average running batch ends.
   */
  completionMs(cost: number, items: number, now: number, placed = false): number {
    const model = this.#model;
    let busyMs = 0;
    const remaining: number[] = [];
    for (const batch of this.#running) {
      const left = Math.max(0, model.predict(batch.cost) - (now - batch.startedAt));
      busyMs += left;
      remaining.push(left);
    }
    const capacity: Capacity = {
      batchMs: (batchCost) => model.predict(batchCost),
      maxBatchSize: this.#settings.maxBatchSize,
      maxBatchCost: this.#options.maxBatchCost,
      slots: this.#settings.maxConcurrentBatches,
      otherKeys: Math.max(0, this.#queues.keys - 1),
      busyMs,
    };
    if (!placed || capacity.slots === 1) return completionMs(capacity, cost, items);
    return Math.min(
      completionMs(capacity, cost, items),
      slotCompletionMs(capacity, remaining, cost, items) ?? Number.POSITIVE_INFINITY,
    );
  }
}

/** The most batches {@link slotCompletionMs} places one by one; past it, the averaged rule. */
const MAX_PLACED_BATCHES = 64;

/**
 * {@link completionMs} on several slots, knowing when each running batch ends (`remaining`, ms from now): the batches
 * go, one at a time, to the slot that frees first, so the last one's end is when the work is done. The averaged
 * rule spreads the running batches' remaining time over the slots, which puts an item that needs one slot (a light
 * client's request under fair queuing, while a heavy client's long generations hold every slot) at the average
 * running batch's end rather than at the first one's, and refuses it though it would start within milliseconds.
 * `undefined` past {@link MAX_PLACED_BATCHES} batches (the averaged rule is then close, and cheaper).
 */
function slotCompletionMs(
  capacity: Capacity,
  remaining: readonly number[],
  cost: number,
  items: number,
): number | undefined {
  const { maxBatchSize, maxBatchCost = Number.POSITIVE_INFINITY, slots } = capacity;
  let batches = Math.ceil(items / maxBatchSize);
  if (maxBatchCost !== Number.POSITIVE_INFINITY) batches = Math.max(batches, Math.ceil(cost / maxBatchCost));
  batches += capacity.otherKeys ?? 0;
  if (batches > MAX_PLACED_BATCHES || batches < 1) return undefined;
  const batchMs = capacity.batchMs(cost / batches);
  // When each slot is next free: the free ones now, the others when their batch ends (more running batches than
  // slots cannot happen; extra ones are ignored).
  const free = Array.from({ length: slots }, (_, index) => remaining[index] ?? 0);
  let end = 0;
  for (let placed = 0; placed < batches; placed += 1) {
    let first = 0;
    for (let slot = 1; slot < free.length; slot += 1)
      if ((free[slot] as number) < (free[first] as number)) first = slot;
    end = (free[first] as number) + batchMs;
    free[first] = end;
  }
  return end;
}

/**
 * What {@link completionMs} reads: how long a batch takes, how batches are formed and run, and the work running now.
 *
 * @example
 * ```ts
 * const capacity: Capacity = { batchMs: (cost) => 40 + 5 * cost, maxBatchSize: 8, slots: 1, busyMs: 20 };
 * ```
 */
export interface Capacity {
  /** Predicted handler ms of one batch of this total cost (a latency model's `predict`, or `predictBatchMs`). */
  readonly batchMs: (cost: number) => number;
  readonly maxBatchSize: number;
  /** @default Infinity */
  readonly maxBatchCost?: number;
  /** Batches that run at once. */
  readonly slots: number;
  /** Other batch keys waiting: each forms batches of its own. @default 0 */
  readonly otherKeys?: number;
  /** What the running batches still need, summed over them (ms). */
  readonly busyMs: number;
}

/**
 * The one completion rule: milliseconds until `items` queued items of total `cost`, at the head of the queue, are
 * done, cut into batches of at most `maxBatchSize` (and `maxBatchCost`) run after the running work on `slots` slots.
 * A batcher's predictor applies it to its own queue; a web replica in front of a shared queue applies it to the
 * fleet (the workers' published fits, slots and running batches).
 *
 * @example
 * ```ts
 * completionMs({ batchMs: (cost) => 40 + 5 * cost, maxBatchSize: 8, slots: 1, busyMs: 0 }, 16, 16); // 160
 * ```
 */
export function completionMs(capacity: Capacity, cost: number, items: number): number {
  const { batchMs: predict, maxBatchSize, maxBatchCost = Number.POSITIVE_INFINITY, slots, busyMs } = capacity;
  let batches = Math.ceil(items / maxBatchSize);
  if (maxBatchCost !== Number.POSITIVE_INFINITY) batches = Math.max(batches, Math.ceil(cost / maxBatchCost));
  batches += capacity.otherKeys ?? 0;
  const workMs = batches * predict(cost / batches);
  if (slots === 1) return busyMs + workMs;
  // Work spread over the slots, its last batch on one slot: exact for one slot, cautious for several.
  const batchMs = workMs / batches;
  return Math.max(batchMs, (busyMs + workMs) / slots + (batchMs * (slots - 1)) / slots);
}
