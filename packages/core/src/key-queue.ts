import type { Item } from './item.js';

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
   * Like {@link take}, but the batch takes from the fairness keys in turn, always from the key that has put the
   * least cost into it so far (ties: the key whose first item is oldest in the queue), so a key with a long backlog
   * cannot fill a batch while another key waits. The batch keeps queue order.
   */
  takeFair(maxBatchSize: number, maxBatchCost: number): Item[] {
    const groups = new Map<unknown, Item[]>();
    for (const item of this.items) {
      const group = groups.get(item.fairnessKey);
      if (group === undefined) groups.set(item.fairnessKey, [item]);
      else group.push(item);
    }
    if (groups.size <= 1) return this.take(maxBatchSize, maxBatchCost);
    const lists = [...groups.values()];
    const heads = lists.map(() => 0);
    const given = lists.map(() => 0);
    const chosen = new Set<Item>();
    let cost = 0;
    while (chosen.size < maxBatchSize) {
      let best = -1;
      for (let index = 0; index < lists.length; index += 1) {
        if ((heads[index] as number) >= (lists[index] as Item[]).length) continue;
        if (best === -1 || (given[index] as number) < (given[best] as number)) best = index;
      }
      if (best === -1) break;
      const item = (lists[best] as Item[])[heads[best] as number] as Item;
      if (chosen.size > 0 && cost + item.cost > maxBatchCost) break;
      heads[best] = (heads[best] as number) + 1;
      given[best] = (given[best] as number) + item.cost;
      cost += item.cost;
      chosen.add(item);
    }
    const batch = this.items.filter((item) => chosen.has(item));
    this.items = this.items.filter((item) => !chosen.has(item));
    this.cost -= cost;
    this.takenCost = cost;
    if (this.items.length > 0) this.windowStart = oldestArrival(this.items);
    return batch;
  }
}

function oldestArrival(items: readonly Item[]): number {
  let oldest = Number.POSITIVE_INFINITY;
  for (const item of items) if (item.enqueuedAt < oldest) oldest = item.enqueuedAt;
  return oldest;
}
