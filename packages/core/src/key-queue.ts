import type { Item } from './item.js';

/** How many more keys without queued work than keys with some may keep their fair-queuing finish. */
const MAX_IDLE_KEYS = 64;

/**
 * The waiting items of one batch key, highest priority first and FIFO within a priority, with their total cost
 * and the time the batch being formed opened (the arrival of its oldest item).
 */
export class KeyQueue {
  readonly key: unknown;
  items: Item[] = [];
  cost = 0;
  /** The total cost of the batch the last `take` returned. */
  takenCost = 0;
  windowStart: number;
  /**
   * Fair queuing (`takeFair`): the start of the last item taken, and the last finish (start + cost) of each key that
   * has items queued or was served lately (see `#forgetIdle`).
   */
  #virtual = 0;
  readonly #finish = new Map<unknown, number>();

  constructor(key: unknown, now: number) {
    this.key = key;
    this.windowStart = now;
  }

  insert(item: Item): void {
    const { items } = this;
    const count = items.length;
    // Equal priorities arrive in order, so a plain push keeps the order; the search is apart so this inlines.
    // (Not `items[count - 1] === undefined` for an empty queue: reading index -1 is a slow named-property lookup.)
    if (count === 0 || (items[count - 1] as Item).priority >= item.priority) items.push(item);
    else this.#insertByPriority(item);
    this.cost += item.cost;
  }

  /** After the items of its priority or higher, before the lower ones. */
  #insertByPriority(item: Item): void {
    const { items } = this;
    let low = 0;
    let high = items.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if ((items[mid] as Item).priority >= item.priority) low = mid + 1;
      else high = mid;
    }
    items.splice(low, 0, item);
  }

  remove(item: Item): boolean {
    const index = this.items.indexOf(item);
    if (index === -1) return false;
    this.items.splice(index, 1);
    this.cost -= item.cost;
    // The batch's window opened with its oldest item; if that one left, the window starts with the next oldest.
    if (item.enqueuedAt === this.windowStart && this.items.length > 0) this.windowStart = oldestArrival(this.items);
    return true;
  }

  /** Whether the next batch is as large as the limits allow, so waiting longer cannot make it larger. */
  isFull(maxBatchSize: number, maxBatchCost: number): boolean {
    return this.items.length >= maxBatchSize || this.cost >= maxBatchCost;
  }

  /** Removes and returns the next batch: items in order while both limits hold. */
  take(maxBatchSize: number, maxBatchCost: number): Item[] {
    const { items } = this;
    let count = 0;
    let cost = 0;
    while (count < items.length && count < maxBatchSize) {
      const next = (items[count] as Item).cost;
      if (count > 0 && cost + next > maxBatchCost) break;
      cost += next;
      count += 1;
    }
    let batch: Item[];
    if (count === items.length) {
      // Hand the whole array over instead of copying it: the common case when batches fill up.
      batch = items;
      this.items = [];
    } else {
      batch = items.splice(0, count);
    }
    this.cost -= cost;
    this.takenCost = cost;
    if (this.items.length > 0) this.windowStart = oldestArrival(this.items);
    return batch;
  }

  /**
   * Like {@link take}, but items are taken by start-time fair queuing over the fairness keys, across batches: each
   * key's next item starts at the later of the queue's virtual time and the key's previous finish (start + cost), and
   * the least start goes first (ties: the key whose first item is oldest in the queue). A key with a long backlog
   * cannot fill a batch while another key waits, and, with batches of one item (continuous scheduling), a key that
   * was idle goes before another key's backlog instead of after it. The batch keeps queue order.
   */
  takeFair(maxBatchSize: number, maxBatchCost: number): Item[] {
    const groups = new Map<unknown, Item[]>();
    for (const item of this.items) {
      const group = groups.get(item.fairnessKey);
      if (group === undefined) groups.set(item.fairnessKey, [item]);
      else group.push(item);
    }
    const finish = this.#finish;
    // Start-time fair queuing across batches: each key's next item starts at the later of the virtual time and the
    // key's last finish; the least start goes first. A key that was idle starts at the virtual time, so it goes
    // before keys with a backlog, whatever their arrival order, even in batches of one item.
    const lists = [...groups.entries()];
    const heads = lists.map(() => 0);
    const chosen = new Set<Item>();
    let cost = 0;
    while (chosen.size < maxBatchSize) {
      let best = -1;
      let bestStart = Number.POSITIVE_INFINITY;
      for (let index = 0; index < lists.length; index += 1) {
        const [key, list] = lists[index] as [unknown, Item[]];
        if ((heads[index] as number) >= list.length) continue;
        const start = Math.max(this.#virtual, finish.get(key) ?? 0);
        if (start < bestStart) {
          best = index;
          bestStart = start;
        }
      }
      if (best === -1) break;
      const [key, list] = lists[best] as [unknown, Item[]];
      const item = list[heads[best] as number] as Item;
      if (chosen.size > 0 && cost + item.cost > maxBatchCost) break;
      heads[best] = (heads[best] as number) + 1;
      finish.set(key, bestStart + Math.max(item.cost, Number.MIN_VALUE));
      this.#virtual = bestStart;
      cost += item.cost;
      chosen.add(item);
    }
    this.#forgetIdle(lists, heads);
    const batch = this.items.filter((item) => chosen.has(item));
    this.items = this.items.filter((item) => !chosen.has(item));
    this.cost -= cost;
    this.takenCost = cost;
    if (this.items.length > 0) this.windowStart = oldestArrival(this.items);
    return batch;
  }

  /**
   * Drops the finish of keys with nothing left queued once the virtual time has passed it (a key served just now
   * keeps it, so it cannot jump ahead when it comes back at once), and of all of them when they outnumber the keys
   * with work queued by more than {@link MAX_IDLE_KEYS}: a stream of new keys (a client-chosen `user`) served while
   * the virtual time stands still must not grow this map.
   */
  #forgetIdle(lists: ReadonlyArray<readonly [unknown, Item[]]>, heads: readonly number[]): void {
    const queued = new Set<unknown>();
    for (let index = 0; index < lists.length; index += 1) {
      const [key, list] = lists[index] as readonly [unknown, Item[]];
      if ((heads[index] as number) < list.length) queued.add(key);
    }
    let idle = 0;
    for (const [key, at] of this.#finish) {
      if (queued.has(key)) continue;
      if (at <= this.#virtual) this.#finish.delete(key);
      else idle += 1;
    }
    if (idle <= queued.size + MAX_IDLE_KEYS) return;
    for (const key of this.#finish.keys()) if (!queued.has(key)) this.#finish.delete(key);
  }
}

function oldestArrival(items: readonly Item[]): number {
  let oldest = Number.POSITIVE_INFINITY;
  for (const item of items) if (item.enqueuedAt < oldest) oldest = item.enqueuedAt;
  return oldest;
}
