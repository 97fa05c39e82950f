import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import { type TextCompletionModel, bundledModelDir, createTextCompletionModel, serverUrl } from '@microbatch/serving';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeTextCompletionApp } from '../testing/text-completion-contract.js';
import { AppModule } from './src/app.js';

describeTextCompletionApp('Nest', fileURLToPath(new URL('.', import.meta.url)), async (model) => {
  const app = await NestFactory.create(AppModule.forRoot(model), { logger: false, bodyParser: false });
  await app.listen(0, '127.0.0.1');
  // app.close() drains the batchers and closes the model (ModelLifecycle).
  return { url: serverUrl(app.getHttpServer() as Server), close: () => app.close() };
});

describe('Nest example: the routes beyond the shared contract', () => {
  let url: string;
  let close: () => Promise<void>;
  let model: TextCompletionModel;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false });
    await model.ready;
    const app = await NestFactory.create(AppModule.forRoot(model), { logger: false, bodyParser: false });
    await app.listen(0, '127.0.0.1');
    url = serverUrl(app.getHttpServer() as Server);
    close = () => app.close();
  });
  afterAll(() => close());

  it('answers an unknown route with a JSON 404 in the shape of the Express and Koa apps', async () => {
    const response = await fetch(`${url}/nope`);
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'No route for GET /nope' } });
  });
});
