import type { Item } from './item.js';
import { KeyQueue } from './key-queue.js';

/** The queued work of one fairness key. */
export interface Tally {
  count: number;
  cost: number;
}

/**
 * Every waiting item, one {@link KeyQueue} per batch key, with the totals admission reads: items, cost, items with
 * a deadline or a priority, and the work queued per fairness key.
 */
export class QueueSet {
  /** The queues of the batch keys other than `undefined` that have items waiting. */
  readonly #byKey = new Map<unknown, KeyQueue>();
  /**
   * The queue of the `undefined` key, kept apart and kept when empty: most batchers have no `batchKey`, and adding
   * it to and deleting it from the map for every batch cost more than the rest of a batch's bookkeeping.
   */
  readonly #default = new KeyQueue(undefined, 0);
  /** `[#default]`, what `queues()` returns in the common case, without allocating. */
  readonly #defaultOnly: readonly KeyQueue[] = [this.#default];
  /** Items waiting. */
  length = 0;
  /** Their total cost. */
  cost = 0;
  /** Waiting items with a finite deadline (early refusal walks the queues only when there are some). */
  deadlined = 0;
  /** Waiting items with a priority other than 0 (predictions scan the queues only when there are some). */
  prioritized = 0;
  /** Whether any call gave a `fairnessKey`: from then on batches and predictions share work by key. */
  fair = false;
  /** Work queued per fairness key (kept once `fair`). */
  readonly tallies = new Map<unknown, Tally>();

  /** How many batch keys have items waiting. */
  get keys(): number {
    return (this.#default.items.length > 0 ? 1 : 0) + this.#byKey.size;
  }

  /** The queues that have items waiting. */
  queues(): readonly KeyQueue[] {
    const withDefault = this.#default.items.length > 0;
    if (this.#byKey.size === 0) return withDefault ? this.#defaultOnly : [];
    return withDefault ? [this.#default, ...this.#byKey.values()] : [...this.#byKey.values()];
  }

  insert(item: Item, now: number): KeyQueue {
    const queue =
      item.key === undefined ? this.#openDefault(now) : (this.#byKey.get(item.key) ?? this.#open(item.key, now));
    queue.insert(item);
    this.length += 1;
    this.cost += item.cost;
    // One test on the hot path for the three rare cases.
    if (item.deadlineAt !== undefined || item.priority !== 0 || item.fairnessKey !== undefined || this.fair) {
      this.#count(item);
    }
    return queue;
  }

  /**
   * {@link insert} for an item of the default key with cost 1, priority 0, no deadline and no fairness key, while
   * no fairness key is in play: nothing to count but the totals.
   */
  insertPlain(item: Item, now: number): KeyQueue {
    const queue = this.#openDefault(now);
    queue.insert(item);
    this.length += 1;
    this.cost += 1;
    return queue;
  }

  /** The default queue, its batch window opened now if it was empty. */
  #openDefault(now: number): KeyQueue {
    const queue = this.#default;
    if (queue.items.length === 0) queue.windowStart = now;
    return queue;
  }

  #open(key: unknown, now: number): KeyQueue {
    const queue = new KeyQueue(key, now);
    this.#byKey.set(key, queue);
    return queue;
  }

  #count(item: Item): void {
    if (item.deadlineAt !== undefined) this.deadlined += 1;
    if (item.priority !== 0) this.prioritized += 1;
    if (item.fairnessKey !== undefined && !this.fair) {
      // The first key seen: the items already waiting belong to the anonymous key.
      this.fair = true;
      for (const queue of this.queues())
        for (const waiting of queue.items) if (waiting !== item) this.#tally(waiting, 1);
    }
    if (this.fair) this.#tally(item, 1);
  }

  /** Takes a waiting item out (cancelled, expired, refused); false if it was not waiting. */
  remove(item: Item): boolean {
    const queue = item.key === undefined ? this.#default : this.#byKey.get(item.key);
    if (queue === undefined || !queue.remove(item)) return false;
    if (queue.items.length === 0) this.#drop(queue);
    this.#forget(item);
    return true;
  }

  /** Removes and returns the next batch of `queue`. */
  take(queue: KeyQueue, maxBatchSize: number, maxBatchCost: number): Item[] {
    const items = this.fair ? queue.takeFair(maxBatchSize, maxBatchCost) : queue.take(maxBatchSize, maxBatchCost);
    if (queue.items.length === 0) this.#drop(queue);
    if (this.deadlined > 0 || this.prioritized > 0 || this.fair) {
      for (const item of items) this.#forget(item);
    } else {
      this.length -= items.length;
      this.cost -= queue.takenCost;
    }
    if (this.length === 0) this.cost = 0; // no drift from floating-point costs
    return items;
  }

  /** Every waiting item, in no particular order (a copy: the caller may remove them). */
  all(): Item[] {
    const items: Item[] = [];
    for (const queue of this.queues()) items.push(...queue.items);
    return items;
  }

  #drop(queue: KeyQueue): void {
    if (queue !== this.#default) this.#byKey.delete(queue.key);
  }

  #forget(item: Item): void {
    this.length -= 1;
    this.cost -= item.cost;
    if (item.deadlineAt !== undefined) this.deadlined -= 1;
    if (item.priority !== 0) this.prioritized -= 1;
    if (this.fair) this.#tally(item, -1);
  }

  #tally(item: Item, sign: 1 | -1): void {
    const tally = this.tallies.get(item.fairnessKey);
    if (tally === undefined) {
      if (sign === 1) this.tallies.set(item.fairnessKey, { count: 1, cost: item.cost });
      return;
    }
    tally.count += sign;
    tally.cost += sign * item.cost;
    // Only active keys are kept, so the map is bounded by the queue, not by how many clients ever came.
    if (tally.count === 0) this.tallies.delete(item.fairnessKey);
  }
}
