// What a user passes to `createTextCompletionModel` is what runs: the worker pool's batcher options (continuous
// scheduling feeds the decode loop one request per batch) never replace a user's setting in silence; a conflict is a
// TypeError naming both values, and an option with no effect under the scheduling chosen is refused, naming it.
import { DEFAULTS } from '@microbatch/core';
import { afterEach, describe, expect, it } from 'vitest';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '../src/index.js';

const model = bundledModelDir();
let created: TextCompletionModel | undefined;

afterEach(async () => {
  await created?.close();
  created = undefined;
});

describe('createTextCompletionModel options', () => {
  it('refuses a maxBatchSize the continuous pool would replace, naming both values', () => {
    expect(() => createTextCompletionModel({ model, log: false, maxBatchSize: 4 })).toThrow(
      new TypeError(
        '`maxBatchSize`: you passed 4, the worker pool needs 1 (pool.batcherOptions, continuous scheduling); ' +
          "'continuous' scheduling hands the decode loop one request at a time: set `maxSequences` for its rows",
      ),
    );
  });

  it('accepts the value the pool needs (nothing is replaced)', () => {
    created = createTextCompletionModel({ model, log: false, maxBatchSize: 1 });
    expect(created.generate.maxBatchSize).toBe(1);
  });

  it.each([
    [{ scheduling: 'request', maxSequences: 4 }, '`maxSequences` (4) bounds the decode loop'],
    [{ scheduling: 'request', maxStepTokens: 64 }, "`maxStepTokens` (64) bounds the decode loop of 'continuous'"],
    [{ scheduling: 'request', prefixCacheMb: 0 }, "`prefixCacheMb` (0) bounds the decode loop of 'continuous'"],
    [
      { maxSequences: 16, maxStepTokens: 16 },
      'Expected `runner.maxStepTokens` to be an integer > `runner.maxSequences`',
    ],
    [{ batchWaitTimeoutMs: 5 }, "`batchWaitTimeoutMs` (5) has no effect with 'continuous' scheduling"],
  ] as const)('refuses %j, which has no effect under that scheduling', (options, message) => {
    expect(() => createTextCompletionModel({ model, log: false, ...options })).toThrow(message);
  });

  it("keeps every batcher setting a user passed with request scheduling, the pool's beside them", () => {
    created = createTextCompletionModel({
      model,
      log: false,
      scheduling: 'request',
      maxBatchSize: 4,
      batchWaitTimeoutMs: 3,
      workers: 2,
    });
    for (const batcher of [created.generate, created.streamer]) {
      expect(batcher.maxBatchSize).toBe(4);
      expect(batcher.batchWaitTimeoutMs).toBe(3);
      expect(batcher.maxConcurrentBatches).toBe(2); // the pool's: one batch per worker thread
    }
  });

  it("uses core's DEFAULTS for what nobody set", () => {
    created = createTextCompletionModel({ model, log: false, scheduling: 'request' });
    expect(created.generate.maxBatchSize).toBe(DEFAULTS.maxBatchSize);
    expect(created.generate.batchWaitTimeoutMs).toBe(DEFAULTS.batchWaitTimeoutMs);
  });
});
