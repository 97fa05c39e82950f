import 'reflect-metadata';
// The serving apps (what `microbatch serve` runs) serve the dashboard at /dashboard, fed by the same registry as
// /metrics, generation metrics included. A fake service stands in for the model.
import type { AddressInfo } from 'node:net';
import { type RequestListener, type Server, createServer } from 'node:http';
import { createBatcher, createStreamingBatcher, END } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createTextGenerationParser } from '@microbatch/inference';
import { afterEach, describe, expect, it } from 'vitest';
import { createTextCompletionApp as expressApp } from '../src/app/express/index.js';
import { startTextCompletionApp as startFastify } from '../src/app/fastify/index.js';
import { startTextCompletionApp as startHono } from '../src/app/hono/index.js';
import { createTextCompletionApp as koaApp } from '../src/app/koa/index.js';
import { TextCompletionModule } from '../src/app/nest/index.js';
import { NestFactory } from '@nestjs/core';
import type { RunningServer, TextCompletionService } from '../src/index.js';

const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };

function fakeService(): TextCompletionService {
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> =>
      inputs.map(() => ({ text: 'ab', finish_reason: 'length', usage })),
    { name: 'generate' },
  );
  const streamer = createStreamingBatcher(async function* (inputs: TextGenerationInput[]) {
    yield inputs.map((): TextGenerationChunk => ({ text: 'ab', finish_reason: 'length', usage }));
    yield inputs.map(() => END);
  });
  const validate = createTextGenerationParser();
  return {
    id: 'fake-model',
    generate,
    streamer,
    batchers: [generate, streamer],
    ready: Promise.resolve(),
    isReady: () => true,
    validate,
    drain: async () => undefined,
    close: async () => undefined,
  };
}

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
  await stopApp?.();
  stopApp = undefined;
});

/** Starts each framework's app on a free port; returns its base URL. */
const APPS: Record<string, (service: TextCompletionService) => Promise<string>> = {
  express: (service) => listen(expressApp(service)),
  koa: (service) => {
    const callback = koaApp(service).callback();
    return listen((req, res) => void callback(req, res));
  },
  nest: async (service) => {
    const app = await NestFactory.create(TextCompletionModule.forRoot(service), { logger: false });
    await app.listen(0, '127.0.0.1');
    stopApp = () => app.close();
    return `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  },
  fastify: (service) => started(startFastify(service, { port: 0, host: '127.0.0.1' })),
  hono: (service) => started(startHono(service, { port: 0, host: '127.0.0.1' })),
};

/** The URL of an app its `start*` function serves; the test's end shuts it down. */
async function started(starting: Promise<RunningServer>): Promise<string> {
  const running = await starting;
  stopApp = () => running.shutdown();
  return running.url;
}

let stopApp: (() => Promise<void>) | undefined;

async function listen(listener: RequestListener): Promise<string> {
  const listening = createServer(listener);
  server = listening;
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
}

describe.each(Object.keys(APPS))('%s app', (name) => {
  it('serves the dashboard page and its data at /dashboard, and generation metrics at /metrics', async () => {
    const base = await (APPS[name] as (service: TextCompletionService) => Promise<string>)(fakeService());
    const page = await fetch(`${base}/dashboard`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('<title>microbatch · fake-model</title>');
    // Self-contained: nothing loaded from elsewhere.
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org)/);
    const completion = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake-model', prompt: 'Once', max_tokens: 2 }),
    });
    expect(completion.status).toBe(200);
    const data = (await (await fetch(`${base}/dashboard?data=1`)).json()) as Record<string, unknown>;
    expect(data).toMatchObject({ title: 'microbatch · fake-model', intervalMs: 1000, windowMs: 300_000 });
    expect(Array.isArray(data.points)).toBe(true);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('gen_ai_server_request_duration_seconds_count{model_name="fake-model"} 1');
    expect(metrics).toContain('microbatch_generation_tokens_total{model_name="fake-model"} 2');
    expect((await fetch(`${base}/dashboard`, { method: 'POST' })).status).toBe(405);
  });
});
