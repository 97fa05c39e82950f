// `createTextCompletionModel` on a decoder exported without a KV cache: with `scheduling` left out it runs under
// request scheduling and logs why (the scheduling rules' fallback); `scheduling: 'continuous'` and a loop option the
// fallback would leave with no effect throw at once, saying why, before any worker starts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeLlamaModel } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledModelDir, createTextCompletionModel } from '../src/index.js';

const WHY =
  "onnx/model.onnx has no KV cache (no past_key_values.* inputs): the continuous decode loop feeds each step's keys " +
  'and values back into the graph';
let root: string;
let noKv: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'microbatch-serving-no-kv-'));
  noKv = join(root, 'no-kv');
  const shape = { hidden: 32, layers: 1, heads: 2, kvHeads: 2, intermediate: 64, vocab: 2048, positions: 256, seed: 3 };
  await writeLlamaModel(noKv, shape, bundledModelDir(), { kvCache: false });
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('createTextCompletionModel on a decoder without a KV cache', () => {
  it('runs request scheduling where none was asked for, and logs why once', async () => {
    const lines: string[] = [];
    const model = createTextCompletionModel({ model: noKv, log: (line) => lines.push(line) });
    try {
      expect(model.pool.scheduling).toBe('request');
      // Request scheduling's batches: the batcher's, split by sampling settings.
      expect(model.decodeLoop).toBeUndefined();
      await model.ready;
      const answer = await model.generate.call({ prompt: 'Once upon a time', max_new_tokens: 4, temperature: 0 });
      expect(answer.usage.completion_tokens).toBe(4);
      expect(lines.filter((line) => line.includes('has no KV cache'))).toEqual([
        `microbatch: ${WHY}; serving it with request scheduling`,
      ]);
    } finally {
      await model.close();
    }
  });

  it("throws for scheduling: 'continuous', saying why", () => {
    expect(() => createTextCompletionModel({ model: noKv, log: false, scheduling: 'continuous' })).toThrow(
      new Error(
        `continuous scheduling cannot run this model: ${WHY}. Use request scheduling (\`scheduling\` request, or ` +
          'leave `scheduling` out)',
      ),
    );
  });

  it('throws for a loop option the fallback would leave with no effect, naming it', () => {
    expect(() => createTextCompletionModel({ model: noKv, log: false, prefixCacheMb: 8 })).toThrow(
      new Error(
        `\`prefixCacheMb\` has no effect for this model: ${WHY}, so it runs under request scheduling, where there is ` +
          'no decode loop (each batch is one generate call over whole prompts)',
      ),
    );
  });
});
