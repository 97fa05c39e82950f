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
  it('refuses a maxBatchSize continuous scheduling fixes to 1, saying why from the scheduling rules', () => {
    expect(() => createTextCompletionModel({ model, log: false, maxBatchSize: 4 })).toThrow(
      new TypeError(
        "`maxBatchSize` (4) has no effect with 'continuous' scheduling: the batcher hands the decode loop one " +
          'request at a time (a batch of 1); bound the loop with `maxSequences`',
      ),
    );
  });

  it('accepts the value the pool needs (nothing is replaced)', () => {
    created = createTextCompletionModel({ model, log: false, maxBatchSize: 1 });
    expect(created.generate.maxBatchSize).toBe(1);
  });

  // The reasons are inference's SCHEDULING_RULES', the ones `microbatch serve` gives for the same flags, with the
  // other settings named as options.
  it.each([
    [
      { scheduling: 'request', maxSequences: 4 },
      "`maxSequences` (4) has no effect with 'request' scheduling: there is no decode loop; a batch holds up to " +
        '`maxBatchSize` requests',
    ],
    [
      { scheduling: 'request', maxStepTokens: 64 },
      "`maxStepTokens` (64) has no effect with 'request' scheduling: there is no decode loop (each batch is one " +
        'generate call over whole prompts)',
    ],
    [
      { scheduling: 'request', prefixCacheMb: 0 },
      "`prefixCacheMb` (0) has no effect with 'request' scheduling: there is no decode loop (each batch is one " +
        'generate call over whole prompts)',
    ],
    [
      { batchWaitTimeoutMs: 5 },
      "`batchWaitTimeoutMs` (5) has no effect with 'continuous' scheduling: the batcher hands the decode loop one " +
        'request at a time (a batch of 1); bound the loop with `maxSequences`',
    ],
  ] as const)('refuses %j, which has no effect under that scheduling, naming why', (options, message) => {
    expect(() => createTextCompletionModel({ model, log: false, ...options })).toThrow(new TypeError(message));
  });

  it('refuses a step budget without room beside the decode rows (the runner spec’s own check)', () => {
    expect(() => createTextCompletionModel({ model, log: false, maxSequences: 16, maxStepTokens: 16 })).toThrow(
      'Expected `runner.maxStepTokens` to be an integer > `runner.maxSequences`',
    );
  });

  it('accepts the value continuous scheduling fixes batchWaitTimeoutMs to', () => {
    created = createTextCompletionModel({ model, log: false, batchWaitTimeoutMs: 0 });
    expect(created.generate.batchWaitTimeoutMs).toBe(0);
  });

  it('refuses a scheduling it does not know, naming the choices', () => {
    expect(() => createTextCompletionModel({ model, log: false, scheduling: 'token' as unknown as 'request' })).toThrow(
      new TypeError("Expected `scheduling` to be one of 'continuous', 'request', got `\"token\"` (string)"),
    );
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
