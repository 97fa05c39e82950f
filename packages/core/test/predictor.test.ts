// The predictor on its own: the latency model read against the queue state. The model is fed batches that take
// exactly 10 ms per unit of cost + 20 ms, so every prediction below is exact arithmetic on `10 · cost + 20`.
import { describe, expect, it } from 'vitest';
import { Item, RunningBatch, Tick } from '../src/item.js';
import { type ResolvedOptions, Settings, resolveOptions } from '../src/options.js';
import { Predictor } from '../src/predictor.js';
import { QueueSet } from '../src/queues.js';
import type { BatcherOptions } from '../src/types.js';

interface Setup {
  readonly predictor: Predictor;
  readonly queues: QueueSet;
  readonly running: RunningBatch[];
  readonly options: ResolvedOptions<unknown>;
}

function setup(options: BatcherOptions<unknown>, trained = true): Setup {
  const resolved = resolveOptions(options);
  const queues = new QueueSet();
  const running: RunningBatch[] = [];
  const predictor = new Predictor(resolved, new Settings(resolved), queues, running);
  if (trained) for (const cost of [1, 2, 3, 4, 2]) predictor.record(cost, 10 * cost + 20);
  return { predictor, queues, running, options: resolved };
}

let seq = 0;
function queue(
  queues: QueueSet,
  count: number,
  fields: { priority?: number; fairnessKey?: string; deadlineAt?: number } = {},
): Item[] {
  return Array.from({ length: count }, () => {
    const item = new Item(seq, fields.priority ?? 0, seq++, new Tick(0), undefined, undefined);
    item.fairnessKey = fields.fairnessKey;
    item.deadlineAt = fields.deadlineAt;
    queues.insert(item, 0);
    return item;
  });
}

describe('Predictor', () => {
  it('predicts nothing until the estimate is ready, and 0 while idle', () => {
    const untrained = setup({ maxBatchSize: 4 }, false);
    expect(untrained.predictor.ready).toBe(false);
    expect(untrained.predictor.latencyMs(0)).toBeNaN();
    const { predictor } = setup({ maxBatchSize: 4 });
    expect(predictor.ready).toBe(true);
    expect(predictor.estimate()).toEqual({ ready: true, samples: 5, msPerCost: 10, msPerBatch: 20 });
    expect(predictor.latencyMs(0)).toBe(0);
    expect(predictor.runsAtOnce()).toBe(true);
  });

  it('cuts the queued work and the arriving item into batches, after the running batches', () => {
    const { predictor, queues, running } = setup({ maxBatchSize: 4 });
    queue(queues, 7);
    expect(predictor.runsAtOnce()).toBe(false);
    // 7 queued + 1 arriving = 2 batches of 4: 2 × 60 ms.
    expect(predictor.predictMs(1, undefined, 0, 0)).toBe(120);
    expect(predictor.admissionMs(1, undefined, 0, 0)).toBe(120); // an exact model has no band
    expect(predictor.latencyMs(0)).toBe(120); // what stats() reports
    // The queue alone: 2 batches of 3.5 on average, 55 ms each.
    expect(predictor.backlogMs(0)).toBe(110);
    // A batch of cost 4 started 25 ms ago has 35 ms left.
    running.push(new RunningBatch(1, undefined, [], [], 4, -25));
    expect(predictor.predictMs(1, undefined, 0, 0)).toBe(155);
    // A group of 3 arriving together: 10 items, 3 batches of 10/3 (53.3 ms each), after the running batch.
    expect(predictor.predictMs(3, undefined, 0, 0, 3)).toBeCloseTo(35 + 3 * (100 / 3 + 20), 9);
  });

  it('counts only the work of equal or higher priority ahead of an item', () => {
    const { predictor, queues } = setup({ maxBatchSize: 4 });
    queue(queues, 2, { priority: 2 });
    queue(queues, 5, { priority: 0 });
    // Priority 1: the 2 items of priority 2 and itself, one batch of 3.
    expect(predictor.predictMs(1, undefined, 1, 0)).toBe(50);
    // Priority 0: all 7 and itself.
    expect(predictor.predictMs(1, undefined, 0, 0)).toBe(120);
  });

  it('spreads the work over maxConcurrentBatches slots, its last batch on one', () => {
    const { predictor, queues } = setup({ maxBatchSize: 4, maxConcurrentBatches: 2 });
    queue(queues, 7);
    // 2 batches of 60 ms on 2 slots: half the work, plus half a batch for the last one on its own slot.
    expect(predictor.predictMs(1, undefined, 0, 0)).toBe(90);
  });

  it('with fairness keys, puts a key with little work ahead at the first slot to free, not the average one', () => {
    // A heavy key's long batches hold all 4 slots (cost 100: 1,020 ms each), started 1,000, 600, 300 and 0 ms ago,
    // and it has 8 more queued; a light key arrives with one item of cost 1.
    const { predictor, queues, running } = setup({ maxBatchSize: 1, maxConcurrentBatches: 4 });
    for (const [index, ago] of [1000, 600, 300, 0].entries()) {
      running.push(new RunningBatch(index, undefined, [], [], 100, -ago));
    }
    queue(queues, 8, { fairnessKey: 'heavy' });
    // Fair queuing lets the heavy key's next item go first (as much work as the light one's); the two batches of
    // 30 ms go to the slot that frees first (20 ms from now), one after the other: done at 80 ms. The averaged rule
    // would say (20 + 420 + 720 + 1020 + 2 × 30) / 4 + 30 × 3/4 = 582.5 ms, past a 500 ms limit.
    expect(predictor.predictMs(1, 'light', 0, 0)).toBe(80);
    // Without fairness keys nothing changes: the averaged rule, 8 queued batches and the arriving one.
    const plain = setup({ maxBatchSize: 1, maxConcurrentBatches: 4 });
    for (const [index, ago] of [1000, 600, 300, 0].entries()) {
      plain.running.push(new RunningBatch(index, undefined, [], [], 100, -ago));
    }
    queue(plain.queues, 8);
    expect(plain.predictor.predictMs(1, undefined, 0, 0)).toBe((20 + 420 + 720 + 1020 + 9 * 30) / 4 + (30 * 3) / 4);
  });

  it("with fairness keys, counts other keys' work only up to the arriving key's own", () => {
    const { predictor, queues } = setup({ maxBatchSize: 4 });
    queue(queues, 3, { fairnessKey: 'a' });
    queue(queues, 1, { fairnessKey: 'b' });
    // For b (1 queued + 1 arriving): b's 2 and a's first 2, one batch of 4.
    expect(predictor.predictMs(1, 'b', 0, 0)).toBe(60);
    // For a (3 queued + 1 arriving): a's 4 and b's 1, two batches of 2.5.
    expect(predictor.predictMs(1, 'a', 0, 0)).toBe(90);
  });

  it('names the queued items that will now miss their deadline, with the predicted wait', () => {
    const { predictor, queues } = setup({ maxBatchSize: 4 });
    queue(queues, 1);
    const [early] = queue(queues, 1, { deadlineAt: 50 }); // 1 batch of 2: 40 ms, in time
    queue(queues, 3);
    const [late] = queue(queues, 1, { deadlineAt: 99 }); // 2 batches of 3: 100 ms, late
    const [onTime] = queue(queues, 1, { deadlineAt: 130 }); // 2 batches of 3.5: 110 ms, just in time
    expect(predictor.late(0)).toEqual([[late, 100]]);
    // 20 ms later (nothing ran), the first one is late too; the last one would end exactly at its deadline.
    expect(predictor.late(20)).toEqual([
      [early, 40],
      [late, 100],
    ]);
    expect(predictor.late(21)).toEqual([
      [early, 40],
      [late, 100],
      [onTime, 110],
    ]);
  });
});
