// One batch key's queue on its own: priority order, batches cut by size and cost, the batch window, and start-time
// fair queuing over fairness keys.
import { describe, expect, it } from 'vitest';
import { Item, Tick } from '../src/item.js';
import { KeyQueue } from '../src/key-queue.js';

let seq = 0;

/** An item named by its input, arrived at `at`, with its priority, cost and fairness key. */
function item(input: string, at = 0, { priority = 0, cost = 1, fairnessKey }: Partial<ItemFields> = {}): Item {
  const made = new Item(input, priority, seq++, new Tick(at), undefined, undefined);
  made.cost = cost;
  made.fairnessKey = fairnessKey;
  return made;
}

interface ItemFields {
  priority: number;
  cost: number;
  fairnessKey: string;
}

const inputs = (items: readonly Item[]): unknown[] => items.map((each) => each.input);

function queueOf(...items: Item[]): KeyQueue {
  const queue = new KeyQueue('key', items[0]?.enqueuedAt ?? 0);
  for (const each of items) queue.insert(each);
  return queue;
}

describe('KeyQueue', () => {
  it('orders items by priority, highest first, and by arrival among equal priorities', () => {
    const queue = queueOf(
      item('a', 0, { priority: 0 }),
      item('b', 1, { priority: 1 }),
      item('c', 2, { priority: 0 }),
      item('d', 3, { priority: 2 }),
      item('e', 4, { priority: 1 }),
      item('f', 5, { priority: -1 }),
    );
    expect(inputs(queue.items)).toEqual(['d', 'b', 'e', 'a', 'c', 'f']);
    expect(queue.cost).toBe(6);
  });

  it('cuts batches at maxBatchSize, in queue order, keeping the rest and its cost', () => {
    const queue = queueOf(item('a', 0), item('b', 1), item('c', 2), item('d', 3), item('e', 4));
    expect(inputs(queue.take(2, Number.POSITIVE_INFINITY))).toEqual(['a', 'b']);
    expect(queue.takenCost).toBe(2);
    expect(inputs(queue.items)).toEqual(['c', 'd', 'e']);
    expect(queue.cost).toBe(3);
    expect(queue.windowStart).toBe(2); // the next batch's window opened with its oldest item
    expect(inputs(queue.take(2, Number.POSITIVE_INFINITY))).toEqual(['c', 'd']);
    expect(inputs(queue.take(2, Number.POSITIVE_INFINITY))).toEqual(['e']);
    expect(queue.items).toEqual([]);
    expect(queue.cost).toBe(0);
  });

  it('cuts batches at maxBatchCost, but always takes the first item', () => {
    const queue = queueOf(
      item('a', 0, { cost: 4 }),
      item('b', 0, { cost: 5 }),
      item('c', 0, { cost: 12 }),
      item('d', 0, { cost: 1 }),
    );
    expect(inputs(queue.take(8, 10))).toEqual(['a', 'b']);
    expect(queue.takenCost).toBe(9);
    expect(inputs(queue.take(8, 10))).toEqual(['c']); // over the limit alone: it goes alone
    expect(queue.takenCost).toBe(12);
    expect(inputs(queue.take(8, 10))).toEqual(['d']);
    expect(queue.cost).toBe(0);
  });

  it('is full once the next batch is as large as its size or cost limit allows', () => {
    const queue = queueOf(item('a', 0, { cost: 3 }), item('b', 0, { cost: 3 }));
    expect(queue.isFull(3, 10)).toBe(false);
    expect(queue.isFull(2, 10)).toBe(true);
    expect(queue.isFull(3, 6)).toBe(true);
  });

  it('removes a waiting item, and moves the window to the next oldest when the oldest leaves', () => {
    const a = item('a', 10);
    const b = item('b', 20, { cost: 2 });
    const c = item('c', 30);
    const queue = queueOf(a, b, c);
    expect(queue.windowStart).toBe(10);
    expect(queue.remove(b)).toBe(true);
    expect(queue.windowStart).toBe(10);
    expect(queue.cost).toBe(2);
    expect(queue.remove(a)).toBe(true);
    expect(queue.windowStart).toBe(30);
    expect(queue.remove(a)).toBe(false);
    expect(inputs(queue.items)).toEqual(['c']);
    expect(queue.cost).toBe(1);
  });

  it('shares a batch among fairness keys: a long backlog does not fill it while another key waits', () => {
    const queue = queueOf(
      item('a1', 0, { fairnessKey: 'a' }),
      item('a2', 0, { fairnessKey: 'a' }),
      item('a3', 0, { fairnessKey: 'a' }),
      item('a4', 0, { fairnessKey: 'a' }),
      item('b1', 1, { fairnessKey: 'b' }),
      item('c1', 2, { fairnessKey: 'c' }),
    );
    // One item of each key before any key's second; the batch keeps queue order.
    expect(inputs(queue.takeFair(4, Number.POSITIVE_INFINITY))).toEqual(['a1', 'a2', 'b1', 'c1']);
    expect(queue.takenCost).toBe(4);
    expect(inputs(queue.items)).toEqual(['a3', 'a4']);
    expect(queue.cost).toBe(2);
  });

  it('lets a key that was idle go before another key’s backlog, across batches of one', () => {
    const queue = queueOf(
      item('a1', 0, { fairnessKey: 'a' }),
      item('a2', 0, { fairnessKey: 'a' }),
      item('a3', 0, { fairnessKey: 'a' }),
    );
    expect(inputs(queue.takeFair(1, Number.POSITIVE_INFINITY))).toEqual(['a1']);
    queue.insert(item('b1', 5, { fairnessKey: 'b' }));
    // Key a's next item starts at its last finish (1); key b starts at the virtual time (0), so it goes first.
    expect(inputs(queue.takeFair(1, Number.POSITIVE_INFINITY))).toEqual(['b1']);
    expect(inputs(queue.takeFair(1, Number.POSITIVE_INFINITY))).toEqual(['a2']);
    expect(inputs(queue.takeFair(1, Number.POSITIVE_INFINITY))).toEqual(['a3']);
    expect(queue.items).toEqual([]);
  });

  it('shares by cost, not by count: a key of costly items gets fewer of them', () => {
    const queue = queueOf(
      item('big1', 0, { fairnessKey: 'big', cost: 3 }),
      item('big2', 0, { fairnessKey: 'big', cost: 3 }),
      item('big3', 0, { fairnessKey: 'big', cost: 3 }),
      item('s1', 0, { fairnessKey: 'small' }),
      item('s2', 0, { fairnessKey: 'small' }),
      item('s3', 0, { fairnessKey: 'small' }),
      item('s4', 0, { fairnessKey: 'small' }),
    );
    // Taking in turns by count would give big three of five places. By cost: big1 runs from 0 to 3, small's items
    // start at 0, 1 and 2, all before big2's start at 3 (a tie with s4, which the earlier key wins).
    expect(inputs(queue.takeFair(5, Number.POSITIVE_INFINITY))).toEqual(['big1', 'big2', 's1', 's2', 's3']);
    expect(queue.takenCost).toBe(9);
    expect(inputs(queue.items)).toEqual(['big3', 's4']);
  });
});
