// Grammars through a worker pool on the bundled TinyStories model, under both schedulings: structured rows follow
// their grammar at temperature 1 in a batch shared with a free row, and a grammar the vocabulary cannot start (the
// model has no `{`) fails its own input only, before anything is generated.
import { createWorkerPool } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

describe.each(['continuous', 'request'] as const)('grammars under %s scheduling', (scheduling) => {
  let pool: Pool;
  beforeAll(async () => {
    await ensureWorkerBuilt();
    pool = createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, scheduling } });
    await pool.ready;
  }, 120_000);
  afterAll(async () => {
    await pool?.close();
  });

  it('structured rows follow their grammars beside a free row of the same batch', async () => {
    for (let round = 0; round < 3; round += 1) {
      const common = { prompt: `Once upon a time ${round}`, max_new_tokens: 24, temperature: 1 };
      const [choice, regex, free] = await pool.run([
        { ...common, grammar: { type: 'choice', choices: ['happy', 'sad', 'a big dog'] } },
        { ...common, grammar: { type: 'regex', pattern: '(yes|no), [0-9]{2}' } },
        common,
      ]);
      if (choice instanceof Error || regex instanceof Error || free instanceof Error) throw new Error('a row failed');
      expect(['happy', 'sad', 'a big dog']).toContain(choice?.text);
      expect(choice?.finish_reason).toBe('stop');
      expect(regex?.text).toMatch(/^(yes|no), [0-9]{2}$/);
      expect(free?.usage.completion_tokens).toBeGreaterThan(0);
    }
  });

  it('a grammar the vocabulary cannot start fails its input alone', async () => {
    const [json, free] = await pool.run([
      { prompt: 'Once', max_new_tokens: 8, grammar: { type: 'json' } },
      { prompt: 'Once', max_new_tokens: 8 },
    ]);
    expect(json).toBeInstanceOf(Error);
    expect((json as Error).message).toContain('cannot spell this grammar');
    expect(free).not.toBeInstanceOf(Error);
  });
});
