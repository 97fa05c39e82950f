import { createBatcher, isBatchError } from '@microbatch/core';
import { createWorkerPool, textGenerationBatchKey } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

const PROMPTS = [
  'Once upon a time, ',
  'The cat ',
  'Lily and Tom went to the park to play with the big red ball. ',
  'Hi ',
  'One day, a little dog named Max ',
  'The sun was shining and the birds ',
];

/**
 * The pool with results (and the handler's) stripped of their decode batch and of what the prefix cache held for
 * them (`usage.prompt_tokens_details`), which only continuous scheduling reports and which differ from run to run:
 * these tests compare tokens across schedulings and runs.
 */
function tokensOnly(real: Pool): Pool {
  const strip = (results: readonly unknown[]) =>
    results.map((result) => {
      if (typeof result !== 'object' || result === null || result instanceof Error) return result;
      const { batch: _batch, usage, ...rest } = result as TextGenerationOutput;
      const { prompt_tokens_details: _cached, ...counts } = usage;
      return { ...rest, usage: counts };
    }) as Array<TextGenerationOutput | Error>;
  const run: Pool['run'] = async (inputs, options) => strip(await real.run(inputs, options));
  const handler: Pool['handler'] = async (inputs, context) => strip(await real.handler(inputs, context));
  return new Proxy(real, {
    get(target, property) {
      if (property === 'run') return run;
      if (property === 'handler') return handler;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

async function oneByOne(pool: Pool, inputs: readonly TextGenerationInput[]): Promise<unknown[]> {
  const results: unknown[] = [];
  for (const input of inputs) results.push(...(await pool.run([input])));
  return results;
}

describe.each(['continuous', 'request'] as const)('text-generation runner (%s scheduling)', (scheduling) => {
  let pool: Pool;

  beforeAll(async () => {
    await ensureWorkerBuilt();
    pool = tokensOnly(createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, scheduling } }));
    await pool.ready;
  });

  afterAll(async () => {
    await pool?.close();
  });

  it('generates the known greedy continuation of the bundled model', async () => {
    const [result] = await pool.run([{ prompt: 'Once upon a time, ', max_new_tokens: 20, temperature: 0 }]);
    expect(result).toEqual({
      text: 'there was a little girl named Lily. She loved to eat yummy food. One day, she found a big, yummy fruit. She did not know what it was, so she ',
      finish_reason: 'length',
      usage: { prompt_tokens: 6, completion_tokens: 20, total_tokens: 26 },
    });
  });

  it('gives the same greedy results batched (left-padded, mixed max_new_tokens) as one by one', async () => {
    const inputs = PROMPTS.map((prompt, index) => ({ prompt, max_new_tokens: 8 + index * 12, temperature: 0 }));
    const batched = await pool.run(inputs);
    expect(batched).toEqual(await oneByOne(pool, inputs));
    batched.forEach((result, index) => {
      expect((result as TextGenerationOutput).usage.completion_tokens).toBe(8 + index * 12);
    });
  });

  it('coalesces concurrent batcher calls into one batch with the same results', async () => {
    const generate = createBatcher(pool.handler, {
      maxBatchSize: 8,
      batchWaitTimeoutMs: 20,
      maxConcurrentBatches: pool.size,
      batchKey: textGenerationBatchKey,
    });
    const inputs = PROMPTS.map((prompt) => ({ prompt, max_new_tokens: 16, temperature: 0 }));
    const sizes: number[] = [];
    const results = await Promise.all(
      inputs.map((input) => generate(input, { onDispatch: (info) => sizes.push(info.batchSize) })),
    );
    expect(sizes).toEqual(PROMPTS.map(() => PROMPTS.length));
    expect(results).toEqual(await oneByOne(pool, inputs));
    await generate.close();
  });

  it('ends an item at its own stop string and strips it', async () => {
    const [result] = await pool.run([
      { prompt: 'Once upon a time, ', max_new_tokens: 40, temperature: 0, stop: ['girl', 'Lily'] },
    ]);
    expect(result).toEqual({
      text: 'there was a little ',
      finish_reason: 'stop',
      usage: { prompt_tokens: 6, completion_tokens: 2, total_tokens: 8 },
    });
  });

  it('always strips <|end_story|> by default, where a runner without stop strings shows it', async () => {
    const raw = tokensOnly(
      createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, stop: [], scheduling } }),
    );
    try {
      await raw.ready;
      const input = { prompt: 'Once upon a time, ', max_new_tokens: 200, temperature: 0 };
      const [unstripped] = (await raw.run([input])) as TextGenerationOutput[];
      const [stripped] = (await pool.run([input])) as TextGenerationOutput[];
      const at = unstripped?.text.indexOf('<|end_story|>') ?? -1;
      expect(at).toBeGreaterThan(0);
      expect(stripped?.text).toBe(unstripped?.text.slice(0, at));
      expect(stripped?.finish_reason).toBe('stop');
    } finally {
      await raw.close();
    }
  });

  it('partitions mixed sampling parameters inside one batch, so greedy items are unaffected', async () => {
    const greedy = { prompt: 'The cat ', max_new_tokens: 12, temperature: 0 };
    const [alone] = await pool.run([greedy]);
    const mixed = await pool.run([{ prompt: 'Hi ', max_new_tokens: 12, temperature: 1.2, top_p: 0.9 }, greedy]);
    expect(mixed[1]).toEqual(alone);
    expect((mixed[0] as TextGenerationOutput).usage.completion_tokens).toBeGreaterThan(0);
  });

  it('applies top_p: a nucleus that keeps only the top token samples greedily', async () => {
    const input = { prompt: 'Lily and Tom went to the park to play with the big red ball. ', max_new_tokens: 24 };
    const [greedy] = await pool.run([{ ...input, temperature: 0 }]);
    const [nucleus] = await pool.run([{ ...input, temperature: 1, top_p: 1e-6 }]);
    expect(nucleus).toEqual(greedy);
  });

  it('samples reproducibly from a seeded worker', async () => {
    const sample = async () => {
      const seeded = tokensOnly(
        createWorkerPool({
          runner: { task: 'text-generation', model: TINYSTORIES_DIR, seed: 7, scheduling },
        }),
      );
      try {
        return await seeded.run(
          PROMPTS.slice(0, 3).map((prompt) => ({ prompt, max_new_tokens: 24, temperature: 1.5 })),
        );
      } finally {
        await seeded.close();
      }
    };
    const first = await sample();
    expect(await sample()).toEqual(first);
    const greedy = await pool.run(
      PROMPTS.slice(0, 3).map((prompt) => ({ prompt, max_new_tokens: 24, temperature: 0 })),
    );
    expect(first).not.toEqual(greedy);
  });

  it('fails only the bad items with INVALID_INPUT naming the field', async () => {
    const results = await pool.run([
      { prompt: '', max_new_tokens: 4 },
      { prompt: 'The cat ', max_new_tokens: 4, temperature: 0 },
      { prompt: 'word '.repeat(300), max_new_tokens: 4 },
      { prompt: 'Hi ', max_new_tokens: 0 },
    ]);
    expect(isBatchError(results[0], 'INVALID_INPUT') && results[0].details).toEqual({ field: 'prompt' });
    expect(results[1]).toMatchObject({ finish_reason: 'length', usage: { completion_tokens: 4 } });
    expect(isBatchError(results[2], 'INVALID_INPUT') && results[2].message).toBe(
      '`prompt` is 602 tokens; with `max_new_tokens` 4 it exceeds the model context of 512 tokens',
    );
    expect(isBatchError(results[3], 'INVALID_INPUT') && results[3].details).toEqual({ field: 'max_new_tokens' });
  });

  it('keeps the main event loop turning while a long batch runs in the worker', async () => {
    let ticks = 0;
    let running = true;
    const spin = () => {
      ticks += 1;
      if (running) setImmediate(spin);
    };
    setImmediate(spin);
    const inputs = PROMPTS.map((prompt) => ({ prompt, max_new_tokens: 200, temperature: 0 }));
    const results = await pool.run(inputs);
    running = false;
    expect(results.every((result) => !(result instanceof Error))).toBe(true);
    // On the main thread, onnxruntime would block every tick for the whole run; here the loop keeps spinning.
    expect(ticks).toBeGreaterThan(50);
  });
});
