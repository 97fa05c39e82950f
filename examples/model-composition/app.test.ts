import { fileURLToPath } from 'node:url';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '@microbatch/serving';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type InProcessServer, serveInProcess, startChild, warmClient } from '../testing/child-server.js';
import { compose, createApp, createScorer } from './src/app.js';

describe('model composition', () => {
  const scorer = createScorer(false);
  let model: TextCompletionModel;
  let server: InProcessServer;
  let url: string;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false, scheduling: 'request' });
    server = await serveInProcess(createApp(model, scorer), () => Promise.all([scorer.close(), model.close()]));
    url = server.url;
    await model.ready;
  });
  afterAll(() => server.close());

  it('calls both batched models concurrently: 4 concurrent calls are one batch of each model', async () => {
    const sizes: string[] = [];
    const offs = [model.generate, scorer].map((batcher) =>
      batcher.on('batchStart', ({ batchSize }) => sizes.push(`${batcher.name}:${batchSize}`)),
    );
    const texts = ['Once upon a time', 'The dog', 'One day, Tom', 'Lily had a red ball'];
    const results = await Promise.all(texts.map((text) => compose(model, scorer, text)));
    for (const off of offs) off();
    expect(sizes.sort()).toEqual(['generate:4', 'scorer:4']);
    expect(results.map((result) => result.prompt_length)).toEqual([
      { words: 4, characters: 17 },
      { words: 2, characters: 8 },
      { words: 3, characters: 13 },
      { words: 5, characters: 20 },
    ]);
  });

  it('answers GET /compose with both models’ answers combined', async () => {
    const response = await fetch(`${url}/compose?text=Once+upon+a+time`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { completion: string };
    expect(body).toEqual({
      prompt: 'Once upon a time ',
      completion: expect.any(String),
      finish_reason: expect.stringMatching(/^(stop|length)$/),
      prompt_length: { words: 4, characters: 17 },
    });
    expect(body.completion.length).toBeGreaterThan(0);
  });

  it('answers a missing text with 400 naming `text`, calling neither model', async () => {
    const before = [model.generate, scorer].map((batcher) => batcher.stats().itemsProcessed);
    const response = await fetch(`${url}/compose`);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: { code: 'INVALID_INPUT', message: expect.any(String), details: { field: 'text' } },
    });
    expect([model.generate, scorer].map((batcher) => batcher.stats().itemsProcessed)).toEqual(before);
  });

  it('drains both models on SIGTERM and exits 0', async () => {
    const cwd = fileURLToPath(new URL('.', import.meta.url));
    const server = await startChild(cwd, ['--import', 'tsx', 'src/main.ts']);
    const client = await warmClient(server.url, 12);
    // 12 requests: a batch of 8 runs first, the other 4 are still waiting when the first answer arrives.
    const sends = Array.from({ length: 12 }, (_, i) => client.send('GET', `/compose?text=Story+${i}`));
    void Promise.race(sends).then(() => server.child.kill('SIGTERM'));
    const answers = await Promise.all(sends);
    client.close();
    expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: 12 }, () => 200));
    expect(await server.exited).toBe(0);
    // The second generator batch was still queued or running when the signal came, and finished.
    expect(server.output()).toMatch(
      /SIGTERM: no longer accepting[\s\S]*\[generate\] batch 2: size [\s\S]*drained and closed; exiting/,
    );
  });
});
