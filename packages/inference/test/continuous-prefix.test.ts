// The bundled model through the continuous loop with its step budget and prefix cache: greedy results equal
// one-by-one generation whether prompts are prefilled whole or in chunks, and whether their prefixes come from the
// cache or not, as sequences join a running loop. Counts come from the runner's counters, never from time.
import { createWorkerPool } from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationRunnerSpec,
  WorkerPool,
} from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

const pools: Pool[] = [];
let reference: Pool;

function pool(runner: Partial<TextGenerationRunnerSpec> = {}): Pool {
  const created = createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, ...runner } });
  pools.push(created);
  return created;
}

/** A system-prompt-like preamble of some 60 tokens that every chat-like request below starts with. */
const PREAMBLE =
  'You are a storyteller for small children. Write a short, kind story with a happy ending, simple words and ' +
  'a little dog. Here is the beginning: ';

/** Prompts crossing the 16-token blocks and the chunks: with and without the shared preamble, of several lengths. */
const PROMPTS = [
  `${PREAMBLE}Once upon a time, `,
  'The cat ',
  `${PREAMBLE}Lily found a ball. `,
  `${PREAMBLE}`,
  'Lily and Tom went to the park to play with the big red ball. They ran and laughed in the warm sun all day. ',
  `${PREAMBLE}One day, a little dog named Max went to the park with his friend. `,
  `${PREAMBLE.slice(0, 70)}`,
  `${PREAMBLE}Tom `,
];

const inputs: TextGenerationInput[] = PROMPTS.map((prompt, index) => ({
  prompt,
  max_new_tokens: 6 + ((index * 7) % 25),
  temperature: 0,
}));

function plain(results: readonly unknown[]): unknown[] {
  return results.map((result) => {
    if (typeof result !== 'object' || result === null || result instanceof Error) return result;
    const { batch: _batch, ...rest } = result as TextGenerationOutput;
    return rest;
  });
}

let expected: unknown[];

beforeAll(async () => {
  await ensureWorkerBuilt();
  reference = pool({ scheduling: 'request' });
  await reference.ready;
  expected = [];
  for (const input of inputs) expected.push(...(await reference.run([input])));
});

afterAll(async () => {
  await Promise.all(pools.map((created) => created.close()));
});

/**
 * Runs the inputs through a continuous pool of three rows: the first three start together, each other one is sent
 * when the one before it has answered, so it joins a loop that is running (and finds the prefixes stored by then).
 */
async function staggered(target: Pool): Promise<unknown[]> {
  const results: unknown[] = new Array(inputs.length);
  const first = [0, 1, 2].map(async (index) => {
    results[index] = (await target.run([inputs[index] as TextGenerationInput]))[0];
  });
  let chain = first[0] as Promise<void>;
  for (let index = 3; index < inputs.length; index += 1) {
    chain = chain.then(async () => {
      results[index] = (await target.run([inputs[index] as TextGenerationInput]))[0];
    });
  }
  await Promise.all([...first, chain]);
  return results;
}

describe('the step budget and the prefix cache on the bundled model', () => {
  for (const [label, runner] of [
    ['whole prefill, no cache', { maxStepTokens: 1000, prefixCacheMb: 0 }],
    ['chunked prefill, no cache', { maxStepTokens: 12, prefixCacheMb: 0 }],
    ['whole prefill, with a 1 MiB cache', { maxStepTokens: 1000, prefixCacheMb: 1 }],
    ['chunked prefill, with the default cache', { maxStepTokens: 12 }],
  ] as const) {
    it(`gives the one-by-one greedy results: ${label}`, async () => {
      const continuous = pool({ maxSequences: 3, ...runner });
      await continuous.ready;
      expect(plain(await staggered(continuous))).toEqual(expected);
      const stats = (await continuous.runnerStats())[0] ?? {};
      const cached = 'prefixCacheMb' in runner && runner.prefixCacheMb === 0 ? 0 : 1;
      const budget = 'prefixCacheMb' in runner ? runner.prefixCacheMb * 2 ** 20 : 64 * 2 ** 20;
      if (runner.maxStepTokens === 12) {
        // At most 12 tokens a step, 3 of them decode rows: the ~60-token preamble takes several chunks.
        expect(stats.prefillCalls).toBeGreaterThan(inputs.length + 6);
      }
      if (cached === 0) {
        expect(stats.prefixCacheLookups).toBe(0);
      } else {
        expect(stats.prefixCacheLookups).toBe(inputs.length);
        // Of the five requests sent after the first three, four start with the preamble's first two blocks or more.
        expect(stats.prefixCacheHits).toBeGreaterThanOrEqual(4);
        expect(stats.prefixCacheTokens).toBeGreaterThanOrEqual(4 * 32);
        expect(stats.prefixCacheBytes).toBeGreaterThan(0);
        expect(stats.prefixCacheBytes).toBeLessThanOrEqual(budget);
      }
    });
  }

  it('refuses budgets it cannot honour and options with no effect, naming them', () => {
    expect(() => pool({ maxSequences: 8, maxStepTokens: 8 })).toThrow(
      'Expected `runner.maxStepTokens` to be an integer > `runner.maxSequences` (8: a step decodes every running row ' +
        'and needs room for a prompt token), got `8` (number)',
    );
    expect(() => pool({ scheduling: 'request', prefixCacheMb: 4 })).toThrow(
      "`runner.prefixCacheMb` (4) bounds the decode loop of 'continuous' scheduling; with `scheduling: 'request'` no " +
        'loop runs: remove it',
    );
    expect(() => pool({ prefixCacheMb: -1 })).toThrow('runner.prefixCacheMb');
    expect(() => pool({ maxPrefillTokens: 64 } as never)).toThrow(
      '`runner.maxPrefillTokens` is now `runner.maxStepTokens`',
    );
  });

  it('refuses at load a cache too small for one block of the model', async () => {
    const tiny = pool({ prefixCacheMb: 0.001 });
    await expect(tiny.ready).rejects.toThrow(/runner\.prefixCacheMb \(0\.001\) holds no 16-token block/);
  });
});
