import { fileURLToPath } from 'node:url';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '@microbatch/serving';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInProcess } from '../testing/child-server.js';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { createApp } from './src/app.js';

describeTextCompletionApp('Koa', fileURLToPath(new URL('.', import.meta.url)), (model) =>
  serveInProcess(createApp(model).callback(), () => model.close()),
);

describe('Koa example: the routes beyond the shared contract', () => {
  let server: Awaited<ReturnType<typeof serveInProcess>>;
  let model: TextCompletionModel;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false });
    await model.ready;
    server = await serveInProcess(createApp(model).callback(), () => model.close());
  });
  afterAll(() => server.close());

  it('answers an unknown route with a JSON 404', async () => {
    const response = await fetch(`${server.url}/nope?x=1`);
    expect([response.status, await response.json()]).toEqual([
      404,
      { error: { code: 'NOT_FOUND', message: 'No route for GET /nope' } },
    ]);
  });
});
