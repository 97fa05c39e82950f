import type { RequestListener } from 'node:http';
import { fileURLToPath } from 'node:url';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '@microbatch/serving';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInProcess } from '../testing/child-server.js';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { createApp } from './src/app.js';

/** The app as a Node listener: Koa answers its own errors, so the promise its callback returns never rejects. */
function listenerOf(model: TextCompletionModel): RequestListener {
  const callback = createApp(model).callback();
  return (req, res) => void callback(req, res);
}

describeTextCompletionApp('Koa', fileURLToPath(new URL('.', import.meta.url)), (model) =>
  serveInProcess(listenerOf(model), () => model.close()),
);

describe('Koa example: the routes beyond the shared contract', () => {
  let server: Awaited<ReturnType<typeof serveInProcess>>;
  let model: TextCompletionModel;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false });
    await model.ready;
    server = await serveInProcess(listenerOf(model), () => model.close());
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
