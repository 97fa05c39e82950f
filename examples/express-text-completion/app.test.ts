import { fileURLToPath } from 'node:url';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel } from '@microbatch/serving';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInProcess } from '../testing/child-server.js';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { createApp } from './src/app.js';

describeTextCompletionApp('Express', fileURLToPath(new URL('.', import.meta.url)), (model) =>
  serveInProcess(createApp(model), () => model.close()),
);

describe('Express example: the routes beyond the shared contract', () => {
  let server: Awaited<ReturnType<typeof serveInProcess>>;
  let model: TextCompletionModel;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false });
    await model.ready;
    server = await serveInProcess(createApp(model), () => model.close());
  });
  afterAll(() => server.close());

  it('answers an unknown route with a JSON 404', async () => {
    const response = await fetch(`${server.url}/nope?x=1`);
    expect([response.status, await response.json()]).toEqual([
      404,
      { error: { code: 'NOT_FOUND', message: 'No route for GET /nope' } },
    ]);
  });

  it("serves the batchers' Prometheus metrics", async () => {
    await fetch(`${server.url}/?text=Once+upon+a+time+`);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/^microbatch_batches_total\{name="[^"]+"\} [1-9]/m);
    expect(text).toContain('# TYPE microbatch_queue_wait_ms histogram');
  });
});
