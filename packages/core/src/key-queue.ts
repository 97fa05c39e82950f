import type { DispatchInfo } from './types.js';
import type { ItemStream } from './item-stream.js';

/** Where an item is in its life: waiting, in a running batch, or done (settled exactly once). */
export const ItemState = { Queued: 0, Running: 1, Settled: 2 } as const;
export type ItemState = (typeof ItemState)[keyof typeof ItemState];

/** One call's bookkeeping from enqueue until it settles. */
export interface Item {
  readonly input: unknown;
  key: unknown;
  cost: number;
  readonly priority: number;
  readonly seq: number;
  readonly enqueuedAt: number;
  state: ItemState;
  resolve: ((value: unknown) => void) | undefined;
  reject: ((error: unknown) => void) | undefined;
  sink: ItemStream<unknown> | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  timer: unknown;
  onDispatch: ((info: DispatchInfo) => void) | undefined;
  batch: RunningBatch | undefined;
}

/** A dispatched batch, from its handler call until it finishes or times out. */
export interface RunningBatch {
  readonly id: number;
  readonly key: unknown;
  readonly items: Item[];
  /** Created on first use (see `controllerOf`). */
  controller: AbortController | undefined;
  readonly startedAt: number;
  /** Items not yet settled; when it reaches 0 early, the handler's signal aborts. */
  open: number;
  /** Items that failed in the handler (for the `batchEnd` event). */
  failed: number;
  timer: unknown;
  /** When the handler was done (or timed out): the slot is free from then on. */
  endedAt: number | undefined;
  finished: boolean;
}

/**
 * The waiting items of one batch key, highest priority first and FIFO within a priority, with their total cost
 * and the time the batch being formed opened (the arrival of its oldest item).
 */
export class KeyQueue {
  readonly key: unknown;
  items: Item[] = [];
  cost = 0;
  windowStart: number;

  constructor(key: unknown, now: number) {
    this.key = key;
    this.windowStart = now;
  }

  insert(item: Item): void {
    const { items } = this;
    const last = items[items.length - 1];
    // Fast path: equal priorities arrive in order, so a plain push keeps the order.
    if (last === undefined || last.priority >= item.priority) {
      items.push(item);
    } else {
      let low = 0;
      let high = items.length;
      while (low < high) {
        const mid = (low + high) >>> 1;
        if ((items[mid] as Item).priority >= item.priority) low = mid + 1;
        else high = mid;
      }
      items.splice(low, 0, item);
    }
    this.cost += item.cost;
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
    if (this.items.length > 0) this.windowStart = oldestArrival(this.items);
    return batch;
  }
}

function oldestArrival(items: readonly Item[]): number {
  let oldest = Number.POSITIVE_INFINITY;
  for (const item of items) if (item.enqueuedAt < oldest) oldest = item.enqueuedAt;
  return oldest;
}
