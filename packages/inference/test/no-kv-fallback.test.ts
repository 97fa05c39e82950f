// A decoder exported without a KV cache (no past_key_values.* inputs): the continuous loop cannot drive it, so a pool
// whose scheduling was left out runs it under request scheduling (the scheduling rules' fallback, with the line to
// log), generating what transformers.js generates from the same weights exported with a KV cache (transformers.js's
// own `generate()` feeds a graph only each step's new token, so it cannot run the no-cache export itself); one asked
// for continuous fails at start saying why, and a loop setting the fallback would drop is refused, naming it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWorkerPool, decoderScheduling } from '@microbatch/inference';
import { writeLlamaModel } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graphInputNames } from '../src/runners/graph-inputs.js';
import { COMPAT_NEW_TOKENS, COMPAT_PROMPTS, COMPAT_SHAPE } from './helpers/compat-fixture.js';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { seamless, transformersGreedy } from './helpers/transformers-reference.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

let root: string;
let noKv: string;
let withKv: string;

beforeAll(async () => {
  await ensureWorkerBuilt();
  root = await mkdtemp(join(tmpdir(), 'microbatch-no-kv-'));
  noKv = join(root, 'no-kv');
  withKv = join(root, 'with-kv');
  await writeLlamaModel(noKv, COMPAT_SHAPE, TINYSTORIES_DIR, { kvCache: false });
  await writeLlamaModel(withKv, COMPAT_SHAPE, TINYSTORIES_DIR);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('a decoder without a KV cache', () => {
  it("reads the graph's inputs from its header", () => {
    expect(graphInputNames(join(noKv, 'onnx', 'model.onnx'))).toEqual(['input_ids', 'attention_mask', 'position_ids']);
    expect(graphInputNames(join(withKv, 'onnx', 'model.onnx'))).toContain('past_key_values.1.value');
  });

  it('falls back to request scheduling where none was asked for, and generates what transformers.js does', async () => {
    // The same shape and seed: the same weights, the same function of the whole sequence, with and without a cache.
    const expected = await transformersGreedy(withKv, 'fp32', 'model', COMPAT_PROMPTS, COMPAT_NEW_TOKENS);
    expect(new Set(expected.map(({ text }) => text)).size).toBe(COMPAT_PROMPTS.length);
    const pool = createWorkerPool({ runner: { task: 'text-generation', model: noKv } });
    try {
      expect(pool.scheduling).toBe('request');
      expect(pool.schedulingFallback).toBe(
        "onnx/model.onnx has no KV cache (no past_key_values.* inputs): the continuous decode loop feeds each step's " +
          'keys and values back into the graph; serving it with request scheduling',
      );
      // Request scheduling's batcher options: whole batches split by sampling, not one request at a time.
      expect(pool.batcherOptions.maxBatchSize).toBeUndefined();
      expect(pool.batcherOptions.batchKey).toBeDefined();
      const results = await pool.run(
        COMPAT_PROMPTS.map((prompt) => ({ prompt, max_new_tokens: COMPAT_NEW_TOKENS, temperature: 0 })),
      );
      const texts = results.map((result) => {
        if (result instanceof Error) throw result;
        expect(result.usage.completion_tokens).toBe(COMPAT_NEW_TOKENS);
        return seamless(result.text);
      });
      expect(texts).toEqual(expected.map(({ text }) => seamless(text)));
    } finally {
      await pool.close();
    }
  });

  it('refuses continuous scheduling asked for, saying why, before any worker starts', () => {
    expect(() =>
      createWorkerPool({ runner: { task: 'text-generation', model: noKv, scheduling: 'continuous' } }),
    ).toThrow(
      new Error(
        "continuous scheduling cannot run this model: onnx/model.onnx has no KV cache (no past_key_values.* inputs): the continuous decode loop feeds each step's keys and values back into the graph. Use request scheduling (runner.scheduling request, or leave runner.scheduling out)",
      ),
    );
  });

  it('refuses a loop setting the fallback would leave with no effect, naming it', () => {
    expect(() => createWorkerPool({ runner: { task: 'text-generation', model: noKv, maxSequences: 8 } })).toThrow(
      /^runner\.maxSequences has no effect for this model: onnx\/model\.onnx has no KV cache .*, so it runs under request scheduling, where there is no decode loop; a batch holds up to runner\.maxBatchSize requests$/,
    );
  });

  it('keeps the scheduling asked for, and continuous by default, where the graph has a KV cache', () => {
    expect(decoderScheduling({ model: withKv, dtype: 'auto' })).toEqual({ scheduling: 'continuous' });
    expect(decoderScheduling({ model: withKv, dtype: 'auto', scheduling: 'request' })).toEqual({
      scheduling: 'request',
    });
    expect(decoderScheduling({ model: noKv, dtype: 'auto', scheduling: 'request' })).toEqual({ scheduling: 'request' });
    // A folder without the dtype's graph keeps what was asked: the worker's load names the missing file.
    expect(decoderScheduling({ model: noKv, dtype: 'q4' })).toEqual({ scheduling: 'continuous' });
  });
});
