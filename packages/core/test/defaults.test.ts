// The one defaults object core exports: its values, and that a batcher created without options runs with them.
import { describe, expect, it } from 'vitest';
import { DEFAULTS, createBatcher, isBatchError } from '../src/index.js';
import { ManualClock, deferred, flush } from '@microbatch/test-kit';

describe('DEFAULTS', () => {
  it('holds the batcher defaults, frozen', () => {
    expect(DEFAULTS).toEqual({
      name: 'default',
      maxBatchSize: 8,
      batchWaitTimeoutMs: 0,
      maxConcurrentBatches: 1,
      maxQueueSize: 1024,
      maxLatencyMs: Number.POSITIVE_INFINITY,
      timeoutMs: Number.POSITIVE_INFINITY,
      executionTimeoutMs: Number.POSITIVE_INFINITY,
      maxBatchCost: Number.POSITIVE_INFINITY,
      onBatchError: 'fail-batch',
      retryAfterSeconds: 1,
    });
    expect(Object.isFrozen(DEFAULTS)).toBe(true);
    expect(() => {
      (DEFAULTS as { maxBatchSize: number }).maxBatchSize = 64;
    }).toThrow(TypeError);
  });

  it('is what a batcher created without options runs with', async () => {
    const clock = new ManualClock();
    const gate = deferred();
    const batches: number[][] = [];
    const batcher = createBatcher(
      async (inputs: number[]) => {
        batches.push([...inputs]);
        await gate.promise;
        return inputs;
      },
      { clock },
    );
    expect(batcher.name).toBe(DEFAULTS.name);
    expect(batcher.maxBatchSize).toBe(DEFAULTS.maxBatchSize);
    expect(batcher.batchWaitTimeoutMs).toBe(DEFAULTS.batchWaitTimeoutMs);
    expect(batcher.maxConcurrentBatches).toBe(DEFAULTS.maxConcurrentBatches);
    expect(batcher.stats().maxLatencyMs).toBe(DEFAULTS.maxLatencyMs);
    // One batch of maxBatchSize runs (one slot), maxQueueSize wait, and the next call is refused.
    const running = Array.from({ length: DEFAULTS.maxBatchSize }, (_, index) => batcher(index));
    await flush();
    const waiting = Array.from({ length: DEFAULTS.maxQueueSize }, (_, index) => batcher(100 + index));
    const refused = await batcher(-1).catch((error: unknown) => error);
    expect(isBatchError(refused) && refused.code).toBe('QUEUE_FULL');
    expect(batches).toEqual([[0, 1, 2, 3, 4, 5, 6, 7]]);
    expect(batcher.queueLength).toBe(DEFAULTS.maxQueueSize);
    gate.resolve();
    await Promise.all([...running, ...waiting]);
    expect(batches.length).toBe(1 + DEFAULTS.maxQueueSize / DEFAULTS.maxBatchSize);
    await batcher.close();
  });
});
