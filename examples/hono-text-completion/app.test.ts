import { fileURLToPath } from 'node:url';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '@microbatch/serving';
import { startTextCompletionApp } from '@microbatch/serving/hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { createApp } from './src/app.js';

const LOCAL = { port: 0, host: '127.0.0.1' };

describeTextCompletionApp('Hono', fileURLToPath(new URL('.', import.meta.url)), async (model) => {
  const running = await startTextCompletionApp(model, LOCAL);
  return { url: running.url, close: () => running.shutdown() };
});

describe('Hono example: the routes beyond the shared contract', () => {
  let model: TextCompletionModel;
  let url: string;
  let shutdown: () => Promise<void>;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false });
    await model.ready;
    ({ url, shutdown } = await startTextCompletionApp(model, LOCAL));
  });
  afterAll(() => shutdown());

  it('answers an unknown route with a JSON 404, and another method on a known path with a 405 and Allow', async () => {
    const missing = await fetch(`${url}/nope?x=1`);
    expect([missing.status, await missing.json()]).toEqual([
      404,
      { error: { code: 'NOT_FOUND', message: 'No route for GET /nope' } },
    ]);
    const wrong = await fetch(`${url}/v1/completions`);
    expect([wrong.status, wrong.headers.get('allow')]).toEqual([405, 'POST']);
  });

  it('answers HEAD / without running the model', async () => {
    const before = model.generate.stats().itemsProcessed;
    const head = await fetch(`${url}/?text=Once`, { method: 'HEAD' });
    // The same Content-Type as the GET's answer (on every framework), with no body.
    expect([head.status, head.headers.get('content-type')]).toEqual([200, 'text/plain; charset=utf-8']);
    expect(model.generate.stats().itemsProcessed).toBe(before);
  });

  it('is a plain Hono app too: app.request() reaches the same routes', async () => {
    const models = await createApp(model).request('/v1/models');
    expect([models.status, ((await models.json()) as { data: Array<{ id: string }> }).data[0]?.id]).toEqual([
      200,
      'tinystories-656k',
    ]);
  });
});
