// Per-request `logprobs` (from the decode loop's own logits) and `seed` (a request's own random stream).
import { createBatcher, isBatchError } from '@microbatch/core';
import type { BatchError } from '@microbatch/core';
import { createWorkerPool } from '@microbatch/inference';
import type { TextGenerationInput, TextGenerationOutput, TextGenerationRunnerSpec } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenLogprobs } from '../src/runners/continuous/logprobs.js';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

describe('tokenLogprobs', () => {
  it("gives the token's log-softmax and the top ids, most likely first, ties by the lower id", () => {
    const logits = Float32Array.from([1, 3, 2, 3, -1]);
    const norm = Math.log([1, 3, 2, 3, -1].reduce((sum, value) => sum + Math.exp(value), 0));
    const { logprob, top } = tokenLogprobs(logits, 2, 3);
    expect(logprob).toBeCloseTo(2 - norm, 12);
    expect(top.map(([id]) => id)).toEqual([1, 3, 2]);
    expect(top.map(([, value]) => value)).toEqual([3 - norm, 3 - norm, 2 - norm].map((v) => expect.closeTo(v, 12)));
    expect(tokenLogprobs(logits, 4, 0).top).toEqual([]);
    // Every token's probability sums to 1.
    const all = tokenLogprobs(logits, 0, 5).top.reduce((sum, [, value]) => sum + Math.exp(value), 0);
    expect(all).toBeCloseTo(1, 12);
  });
});

describe('text generation: logprobs and seed per request', () => {
  const pools: { close(): Promise<void> }[] = [];
  function pool(runner: Partial<TextGenerationRunnerSpec> = {}) {
    const created = createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, ...runner } });
    pools.push(created);
    return created;
  }
  beforeAll(() => ensureWorkerBuilt());
  afterAll(() => Promise.all(pools.map((created) => created.close())));

  it('reports every generated token with its top alternatives, the same in the stream', async () => {
    const continuous = pool();
    const input: TextGenerationInput = { prompt: 'The cat ', max_new_tokens: 8, temperature: 0, logprobs: 2 };
    const [output] = (await continuous.run([input])) as TextGenerationOutput[];
    const logprobs = output?.logprobs ?? [];
    expect(logprobs).toHaveLength(output?.usage.completion_tokens ?? -1);
    for (const entry of logprobs) {
      expect(entry.top_logprobs).toHaveLength(2);
      expect(entry.top_logprobs[0]).toEqual({ token: entry.token, logprob: entry.logprob, bytes: entry.bytes });
      expect(entry.top_logprobs[1]?.logprob).toBeLessThanOrEqual(entry.logprob);
    }
    // Greedy: the tokens' texts are the answer.
    expect(logprobs.map((entry) => entry.token).join('')).toContain(output?.text.trim().slice(0, 5));
    const streamed = [];
    for await (const step of continuous.stream([input])) {
      const slot = step[0];
      if (typeof slot === 'object' && slot !== null && 'logprobs' in slot) streamed.push(...(slot.logprobs ?? []));
    }
    expect(streamed).toEqual(logprobs);
    const [plain] = (await continuous.run([{ ...input, logprobs: undefined }])) as TextGenerationOutput[];
    expect(plain).not.toHaveProperty('logprobs');
  });

  it('draws the same tokens for the same seed whatever shares the loop, and refuses seed / logprobs with request scheduling', async () => {
    const continuous = pool();
    const generate = createBatcher(continuous.handler, { ...continuous.batcherOptions, batchWaitTimeoutMs: 0 });
    const seeded = { prompt: 'Once upon a time, ', max_new_tokens: 24, temperature: 1, seed: 42 };
    const alone = await generate(seeded);
    const crowd = await Promise.all([
      generate({ prompt: 'The dog ', max_new_tokens: 30, temperature: 1 }),
      generate(seeded),
      generate({ ...seeded, seed: 43 }),
    ]);
    expect(crowd[1]?.text).toBe(alone.text);
    expect(crowd[2]?.text).not.toBe(alone.text);
    const request = pool({ scheduling: 'request' });
    const outcomes = await Promise.allSettled([
      request.run([{ prompt: 'The cat ', seed: 1 }]).then((results) => results[0]),
      request.run([{ prompt: 'The cat ', logprobs: 0 }]).then((results) => results[0]),
    ]);
    for (const [index, field] of ['seed', 'logprobs'].entries()) {
      const outcome = outcomes[index];
      const error = (outcome?.status === 'rejected' ? outcome.reason : outcome?.value) as BatchError;
      expect(isBatchError(error, 'INVALID_INPUT')).toBe(true);
      expect(error.details).toEqual({ field });
      expect(error.message).toBe(`\`${field}\` needs continuous scheduling; this model runs with 'request'`);
    }
  });
});
