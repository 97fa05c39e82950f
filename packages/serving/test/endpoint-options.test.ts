// The endpoints' options objects: chat's request limits set through the apps' options like completions', and misuse
// found when an endpoint is made (a `TypeError` naming the option), not as a 500 on every request.
import { afterEach, describe, expect, it } from 'vitest';
import {
  type RunningServer,
  createChatCompletionsEndpoint,
  createCompletionsEndpoint,
  createEmbeddingsEndpoint,
} from '../src/index.js';
import { startTextCompletionApp } from '../src/app/express/index.js';
import { gatedService } from './gated-service.js';

let running: RunningServer | undefined;
afterEach(async () => {
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});

/** A streamed chat of `n` choices (the gated service streams at once) on the app at `url`: status and body. */
async function chat(url: string, n: number): Promise<{ status: number; body: string }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Once' }], n, stream: true }),
  });
  return { status: response.status, body: await response.text() };
}

describe('chat request limits through the app options', () => {
  it('refuses more choices than `chatLimits.maxChoices` with OpenAI’s 400 naming `n`; the default allows them', async () => {
    running = await startTextCompletionApp(gatedService({}).service, { port: 0, host: '127.0.0.1' });
    const byDefault = await chat(running.url, 3);
    await running.shutdown();
    running = await startTextCompletionApp(
      gatedService({}).service,
      { port: 0, host: '127.0.0.1' },
      { chatLimits: { maxChoices: 2 } },
    );
    const limited = await chat(running.url, 3);
    expect(byDefault.status).toBe(200);
    expect(byDefault.body).toContain('data: [DONE]');
    expect(limited.status).toBe(400);
    expect(JSON.parse(limited.body)).toMatchObject({
      error: { type: 'invalid_request_error', param: 'n', code: 'INVALID_INPUT' },
    });
  });
});

describe('endpoint misuse', () => {
  const { service } = gatedService({});

  it.each([
    [
      'a completions limit below 1',
      () => createCompletionsEndpoint(service, { limits: { maxPrompts: 0 } }),
      'Expected `maxPrompts` to be an integer >= 1, got `0` (number)',
    ],
    [
      'a chat limit that is not an integer',
      () => createChatCompletionsEndpoint(service, { limits: { maxMessages: 1.5 } }),
      'Expected `maxMessages` to be an integer >= 1, got `1.5` (number)',
    ],
    [
      'a clientKey that is not a function',
      () => createChatCompletionsEndpoint(service, { clientKey: 'x-api-key' as never }),
      'Expected `clientKey` to be a function, got `"x-api-key"` (string)',
    ],
    [
      'an exposeDetails that is not a boolean',
      () => createCompletionsEndpoint(service, { exposeDetails: 'yes' as never }),
      'Expected `exposeDetails` to be a boolean, got `"yes"` (string)',
    ],
    [
      'a model that is not an embedding model',
      () => createEmbeddingsEndpoint({} as never),
      'Expected `model` to be an embedding model from `createEmbeddingModel()`, got `[object Object]` (object)',
    ],
  ])('throws a TypeError for %s', (_name, create, message) => {
    expect(create).toThrow(new TypeError(message));
  });
});
