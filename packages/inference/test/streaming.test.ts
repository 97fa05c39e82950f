import { END, SKIP, createStreamingBatcher, isBatchError } from '@microbatch/core';
import { createWorkerPool, textGenerationBatchKey } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

const INPUTS: TextGenerationInput[] = [
  { prompt: 'Once upon a time, ', max_new_tokens: 200, temperature: 0 },
  { prompt: 'The cat ', max_new_tokens: 7, temperature: 0 },
  {
    prompt: 'Lily and Tom went to the park to play with the big red ball. ',
    max_new_tokens: 60,
    temperature: 0,
    stop: ['ball'],
  },
  { prompt: 'Hi ', max_new_tokens: 30, temperature: 0 },
];

describe.each(['continuous', 'request'] as const)('streaming text generation (%s scheduling)', (scheduling) => {
  let pool: WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

  beforeAll(async () => {
    await ensureWorkerBuilt();
    pool = createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, scheduling } });
    await pool.ready;
  });

  afterAll(async () => {
    await pool?.close();
  });

  it('yields per-step pieces whose concatenation equals the non-streamed result, then END', async () => {
    const expected = (await pool.run(INPUTS)) as TextGenerationOutput[];
    const pieces: string[][] = INPUTS.map(() => []);
    const finals: (TextGenerationChunk | undefined)[] = INPUTS.map(() => undefined);
    const ended = INPUTS.map(() => false);
    for await (const step of pool.stream(INPUTS)) {
      expect(step).toHaveLength(INPUTS.length);
      step.forEach((slot, index) => {
        if (slot === SKIP) return;
        expect(ended[index]).toBe(false);
        if (slot === END) {
          expect(finals[index]).toBeDefined();
          ended[index] = true;
          return;
        }
        const chunk = slot as TextGenerationChunk;
        expect(finals[index]).toBeUndefined();
        pieces[index]?.push(chunk.text);
        if (chunk.finish_reason !== null) finals[index] = chunk;
      });
    }
    expect(ended).toEqual(INPUTS.map(() => true));
    expected.forEach((output, index) => {
      expect(pieces[index]?.join('')).toBe(output.text);
      expect(finals[index]).toMatchObject({ finish_reason: output.finish_reason, usage: output.usage });
      // Token by token, not one lump at the end.
      expect(pieces[index]?.length).toBeGreaterThan(2);
    });
    // The stop string is held back while it could still be forming, so it never leaks into a piece.
    expect(pieces[2]?.join('')).not.toContain('ball');
    expect(finals[2]?.finish_reason).toBe('stop');
  });

  it('streams through createStreamingBatcher, one stream per caller', async () => {
    const expected = (await pool.run(INPUTS)) as TextGenerationOutput[];
    const streaming = createStreamingBatcher(pool.streamingHandler, {
      batchWaitTimeoutMs: 20,
      maxConcurrentBatches: pool.size,
      batchKey: textGenerationBatchKey,
    });
    const texts = await Promise.all(
      INPUTS.map(async (input) => {
        let text = '';
        for await (const chunk of streaming.stream(input)) text += chunk.text;
        return text;
      }),
    );
    expect(texts).toEqual(expected.map((output) => output.text));
    await streaming.close();
  });

  it('fails only the invalid item of a streamed batch', async () => {
    const steps = [];
    for await (const step of pool.stream([{ prompt: '' }, { prompt: 'The cat ', max_new_tokens: 3, temperature: 0 }]))
      steps.push(step);
    const first = steps[0]?.[0];
    expect(isBatchError(first, 'INVALID_INPUT') && first.details).toEqual({ field: 'prompt' });
    const text = steps
      .map((step) => step[1])
      .filter((slot): slot is TextGenerationChunk => typeof slot === 'object' && slot !== null && 'text' in slot);
    expect(text.map((chunk) => chunk.text).join('')).toBe(
      ((await pool.run([{ prompt: 'The cat ', max_new_tokens: 3, temperature: 0 }]))[0] as TextGenerationOutput).text,
    );
  });
});
