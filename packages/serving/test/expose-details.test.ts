// The apps' `exposeDetails` option: a refusal (503) shows the engine's own message and figures only when the app was
// made with it, on every route that maps errors (the tutorial's `GET /?text=` and OpenAI's chat endpoint here),
// through real servers of two frameworks whose glue differs (Express's routes, Fastify's hijacked replies).
import { waitFor } from '@microbatch/test-kit';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer, TextCompletionAppOptions } from '../src/index.js';
import {
  createTextCompletionApp as createExpress,
  startTextCompletionApp as startExpress,
} from '../src/app/express/index.js';
import {
  createTextCompletionApp as createFastify,
  startTextCompletionApp as startFastify,
} from '../src/app/fastify/index.js';
import { createEmbeddingsApp as createHonoEmbeddings } from '../src/app/hono/index.js';
import { TextCompletionModule } from '../src/app/nest/index.js';
import { gatedService } from './gated-service.js';

const APPS = { express: startExpress, fastify: startFastify } as const;
const ENGINE_MESSAGE = 'Batcher "generate" queue is full (maxQueueSize = 1)';
const FIXED_MESSAGE = 'The server is at capacity: its queue is full; retry later';
let running: RunningServer | undefined;

afterEach(async () => {
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});

/** The body of `GET /?text=` and of `POST /v1/chat/completions` refused while one batch runs and one request waits. */
async function refusals(framework: keyof typeof APPS, options: TextCompletionAppOptions) {
  const { service, generate, finishOne } = gatedService({ maxQueueSize: 1 });
  running = await APPS[framework](service, { port: 0, host: '127.0.0.1' }, options);
  const url = running.url;
  const get = () => fetch(`${url}/?text=Once`);
  const first = get();
  await waitFor('the first batch running', () => generate.inFlightBatches === 1);
  const second = get();
  await waitFor('one request queued', () => generate.queueLength === 1);
  const text = await get();
  const chat = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Once' }], max_tokens: 1 }),
  });
  const answers = {
    text: { status: text.status, retryAfter: text.headers.get('retry-after'), body: await text.json() },
    chat: { status: chat.status, retryAfter: chat.headers.get('retry-after'), body: await chat.json() },
  };
  await finishOne();
  await finishOne();
  expect([(await first).status, (await second).status]).toEqual([200, 200]);
  return answers;
}

describe.each(Object.keys(APPS) as Array<keyof typeof APPS>)('the %s app', (framework) => {
  it('answers a refusal with a fixed message and no figures by default', async () => {
    const { text, chat } = await refusals(framework, {});
    expect(text).toEqual({
      status: 503,
      retryAfter: expect.stringMatching(/^\d+$/),
      body: { error: { code: 'QUEUE_FULL', message: FIXED_MESSAGE, retryAfterSeconds: expect.any(Number) } },
    });
    expect(chat.status).toBe(503);
    expect(chat.body).toMatchObject({ error: { code: 'QUEUE_FULL', message: FIXED_MESSAGE } });
    expect(JSON.stringify([text.body, chat.body])).not.toMatch(/Batcher|maxQueueSize/);
  });

  it("answers a refusal with the engine's own message with `exposeDetails: true`", async () => {
    const { text, chat } = await refusals(framework, { exposeDetails: true });
    expect(text).toEqual({
      status: 503,
      retryAfter: expect.stringMatching(/^\d+$/),
      body: { error: { code: 'QUEUE_FULL', message: ENGINE_MESSAGE, retryAfterSeconds: expect.any(Number) } },
    });
    expect(chat.status).toBe(503);
    expect(chat.body).toMatchObject({ error: { code: 'QUEUE_FULL', message: ENGINE_MESSAGE } });
  });
});

describe('exposeDetails', () => {
  it('is refused, naming it, unless a boolean', () => {
    const { service } = gatedService({});
    const bad = { exposeDetails: 'yes' } as unknown as TextCompletionAppOptions;
    const message = 'Expected `exposeDetails` to be a boolean, got `"yes"` (string)';
    expect(() => createExpress(service, bad)).toThrow(new TypeError(message));
    expect(() => createFastify(service, bad)).toThrow(new TypeError(message));
    expect(() => TextCompletionModule.forRoot(service, bad)).toThrow(new TypeError(message));
    const embeddings = { exposeDetails: 1 } as never;
    expect(() => createHonoEmbeddings({} as never, embeddings)).toThrow(/Expected `exposeDetails` to be a boolean/);
  });
});
