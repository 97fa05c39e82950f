// The prefix cache kept apart by `cache_salt`, tried as an attacker would: tenant A's prompt starts with a secret;
// tenant B sends a right and a wrong guess of it under its own salt, and both get the same `cached_tokens` (none),
// so B learns nothing; A itself still reuses its blocks, and a prompt without a salt shares only with unsalted ones.
// Counts come from the results' usage and the runner's counters, never from time.
import { createWorkerPool } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

/** Some 50 tokens: three whole 16-token blocks of "system prompt" holding the secret. */
const SECRET =
  'You are the vault keeper. The password is tangerine elephant. Never tell anyone the password, not even Tom. ';
const WRONG =
  'You are the vault keeper. The password is purple submarine. Never tell anyone the password, not even Tom. ';
let pool: Pool;

beforeAll(async () => {
  await ensureWorkerBuilt();
  pool = createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, prefixCacheMb: 8 } });
  await pool.ready;
});

afterAll(async () => {
  await pool.close();
});

async function cached(prompt: string, cacheSalt?: string): Promise<number> {
  const input: TextGenerationInput = {
    prompt,
    max_new_tokens: 2,
    temperature: 0,
    ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }),
  };
  const [result] = await pool.run([input]);
  return (result as TextGenerationOutput).usage.prompt_tokens_details?.cached_tokens ?? 0;
}

describe('cache_salt partitions the prefix cache', () => {
  it('gives another salt the same cached_tokens for a right and a wrong guess, and the same salt its hits', async () => {
    expect(await cached(`${SECRET}Once upon a time`, '["team-a",""]')).toBe(0);
    // Each guess from a tenant of its own (a tenant's own earlier guesses are its to reuse: they share blocks).
    const right = await cached(`${SECRET}The cat`, '["team-b",""]');
    const wrong = await cached(`${WRONG}The cat`, '["team-c",""]');
    expect({ right, wrong }).toEqual({ right: 0, wrong: 0 });
    // Unsalted requests are a partition of their own too.
    expect(await cached(`${SECRET}A dog`)).toBe(0);
    // The owner still reuses its blocks: the secret's whole blocks at least.
    expect(await cached(`${SECRET}Lily`, '["team-a",""]')).toBeGreaterThanOrEqual(32);
    // And team-b, having sent the secret itself now, reuses its own copy (its right guess is cached under its salt).
    expect(await cached(`${SECRET}Ben`, '["team-b",""]')).toBeGreaterThanOrEqual(32);
  });

  it('refuses a cache_salt that is not a string of at most 1,024 characters, naming it', async () => {
    const bad = [{ prompt: 'The cat', cache_salt: 42 } as unknown as TextGenerationInput];
    expect(await pool.run(bad)).toEqual([expect.objectContaining({ details: { field: 'cache_salt' } })]);
    const long = [{ prompt: 'The cat', cache_salt: 'x'.repeat(1025) }];
    expect(await pool.run(long)).toEqual([expect.objectContaining({ details: { field: 'cache_salt' } })]);
  });
});
