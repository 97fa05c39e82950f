// Work-conserving dispatch (the default, `batchWaitTimeoutMs: 0`): idle means no timer and no wait; busy means
// arrivals gather into the batch formed when a slot frees.
import { beforeEach, describe, expect, it } from 'vitest';
import { createBatcher, createStreamingBatcher, END } from '../src/index.js';
import { ManualClock, deferred, flush } from '@microbatch/test-kit';

let clock: ManualClock;
beforeEach(() => {
  clock = new ManualClock();
});

/** A handler whose calls stay running until the test opens their gate. */
function gated() {
  const batches: number[][] = [];
  const gates: Array<ReturnType<typeof deferred<void>>> = [];
  const handler = async (inputs: number[]) => {
    batches.push([...inputs]);
    const gate = deferred();
    gates.push(gate);
    await gate.promise;
    return inputs.map((x) => x * 10);
  };
  return { batches, gates, handler };
}

describe('work-conserving dispatch', () => {
  it('dispatches an item arriving at an idle batcher in the same turn, with no timer', async () => {
    const { batches, handler } = gated();
    const batcher = createBatcher(handler, { clock });
    void batcher(1);
    expect(batches).toEqual([]); // not inside the call: the rest of the synchronous burst may still come
    await Promise.resolve();
    expect(batches).toEqual([[1]]); // one microtask later, before any timer or I/O turn
    expect(clock.pendingTimers).toBe(0);
  });

  it('puts calls made in the same synchronous burst into one batch', async () => {
    const { batches, handler } = gated();
    const batcher = createBatcher(handler, { clock, maxBatchSize: 8 });
    for (const x of [1, 2, 3, 4, 5]) void batcher(x);
    await Promise.resolve();
    expect(batches).toEqual([[1, 2, 3, 4, 5]]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('dispatches a full batch inside the call that fills it', () => {
    const { batches, handler } = gated();
    const batcher = createBatcher(handler, { clock, maxBatchSize: 3 });
    for (const x of [1, 2, 3]) void batcher(x);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('gathers arrivals while the slot is busy and forms the next batch when it frees, not before', async () => {
    const { batches, gates, handler } = gated();
    const batcher = createBatcher(handler, { clock, maxBatchSize: 8 });
    const first = batcher(1);
    await flush();
    const later = [batcher(2)];
    await clock.advance(7);
    later.push(batcher(3));
    await clock.advance(500);
    later.push(batcher(4));
    await flush();
    expect(batches).toEqual([[1]]);
    expect(batcher.queueLength).toBe(3);
    gates[0]?.resolve();
    await flush();
    expect(batches).toEqual([[1], [2, 3, 4]]);
    gates[1]?.resolve();
    expect(await Promise.all([first, ...later])).toEqual([10, 20, 30, 40]);
  });

  it("keeps Ray Serve's seed true: 9 concurrent calls, maxBatchSize 4, a slow handler -> batches of 4, 4, 1", async () => {
    const { batches, gates, handler } = gated();
    const batcher = createBatcher(handler, { clock, maxBatchSize: 4 });
    const results = Array.from({ length: 9 }, (_, i) => batcher(i + 1));
    await flush();
    for (let batch = 0; batch < 3; batch += 1) {
      gates[batch]?.resolve();
      await flush();
    }
    expect(batches).toEqual([[1, 2, 3, 4], [5, 6, 7, 8], [9]]);
    expect(await Promise.all(results)).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90]);
  });

  it('fills every free slot at once with maxConcurrentBatches > 1', async () => {
    const { batches, gates, handler } = gated();
    const batcher = createBatcher(handler, { clock, maxBatchSize: 2, maxConcurrentBatches: 2 });
    const results = [1, 2, 3, 4, 5].map((x) => batcher(x));
    await flush();
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    gates[1]?.resolve();
    await flush();
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
    gates[0]?.resolve();
    gates[2]?.resolve();
    expect(await Promise.all(results)).toEqual([10, 20, 30, 40, 50]);
  });

  it('serves batch keys in turn, oldest head first, as soon as a slot frees', async () => {
    const batches: string[][] = [];
    const gates: Array<ReturnType<typeof deferred<void>>> = [];
    const batcher = createBatcher(
      async (inputs: string[]) => {
        batches.push([...inputs]);
        const gate = deferred();
        gates.push(gate);
        await gate.promise;
        return inputs;
      },
      { clock, batchKey: (input: string) => input[0] },
    );
    const results = ['a1', 'b1', 'a2', 'b2'].map((x) => batcher(x));
    await flush();
    expect(batches).toEqual([['a1', 'a2']]);
    gates[0]?.resolve();
    await flush();
    expect(batches).toEqual([
      ['a1', 'a2'],
      ['b1', 'b2'],
    ]);
    gates[1]?.resolve();
    expect(await Promise.all(results)).toEqual(['a1', 'b1', 'a2', 'b2']);
  });

  it('streams too: the next streaming batch forms when the running stream ends', async () => {
    const gate = deferred();
    const batches: number[][] = [];
    const batcher = createStreamingBatcher(
      async function* (inputs: number[]) {
        batches.push([...inputs]);
        if (batches.length === 1) await gate.promise;
        yield inputs.map((x) => x);
        yield inputs.map(() => END);
      },
      { clock },
    );
    const first = batcher.call(1);
    await flush();
    const rest = [batcher.call(2), batcher.call(3)];
    await flush();
    expect(batches).toEqual([[1]]);
    gate.resolve();
    expect(await Promise.all([first, ...rest])).toEqual([[1], [2], [3]]);
    expect(batches).toEqual([[1], [2, 3]]);
  });

  it('switches between work-conserving and a fixed wait at run time', async () => {
    const batches: number[][] = [];
    const batcher = createBatcher(
      async (inputs: number[]) => {
        batches.push([...inputs]);
        return inputs;
      },
      { clock },
    );
    batcher.batchWaitTimeoutMs = 5;
    void batcher(1);
    await flush();
    expect(batches).toEqual([]);
    await clock.advance(5);
    expect(batches).toEqual([[1]]);
    batcher.batchWaitTimeoutMs = 0;
    void batcher(2);
    await Promise.resolve();
    expect(batches).toEqual([[1], [2]]);
  });
});

// Fair queuing across batches (issue 11: with continuous scheduling the batcher takes one item per batch, so
// fairness within a batch alone would be first-come-first-served).
/** A handler that records each batch's inputs and holds it until released; one slot, batches of one item. */
function recordingGate() {
  const order: string[] = [];
  const releases: Array<() => void> = [];
  const handler = async (inputs: readonly string[]) => {
    order.push(...inputs);
    await new Promise<void>((resolve) => releases.push(resolve));
    return inputs;
  };
  const runAll = async (count: number) => {
    for (let index = 0; index < count; index += 1) {
      while (releases.length <= index) await new Promise((resolve) => setImmediate(resolve));
      (releases[index] as () => void)();
    }
  };
  return { order, handler, runAll };
}

describe('fair dispatch across batches', () => {
  it("with batches of one item, a key that queues behind another key's backlog goes next, not last", async () => {
    const { order, handler, runAll } = recordingGate();
    const batcher = createBatcher(handler, { maxBatchSize: 1, maxConcurrentBatches: 1 });
    const calls = ['h1', 'h2', 'h3', 'h4'].map((input) => batcher.call(input, { fairnessKey: 'heavy' }));
    calls.push(batcher.call('l1', { fairnessKey: 'light' }));
    await runAll(5);
    await Promise.all(calls);
    expect(order).toEqual(['h1', 'l1', 'h2', 'h3', 'h4']);
  });

  it('two backlogged keys take turns, batch after batch', async () => {
    const { order, handler, runAll } = recordingGate();
    const batcher = createBatcher(handler, { maxBatchSize: 1, maxConcurrentBatches: 1 });
    const calls = [
      ...['a1', 'a2', 'a3'].map((input) => batcher.call(input, { fairnessKey: 'a' })),
      ...['b1', 'b2', 'b3'].map((input) => batcher.call(input, { fairnessKey: 'b' })),
    ];
    await runAll(6);
    await Promise.all(calls);
    expect(order).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
  });
});
