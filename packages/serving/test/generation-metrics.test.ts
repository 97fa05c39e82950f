// Generation metrics on `/metrics`, through a real HTTP server: a completions (or chat) endpoint with a fake model
// whose batches wait for the test, so the running / waiting gauges and the refusals are read at known moments.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBatcher, createStreamingBatcher, END } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createTextGenerationParser } from '@microbatch/inference';
import { GENERATION_METRIC_NAMES as N, createGenerationMetrics, metricsHandler } from '@microbatch/prometheus';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type CompletionsModel, createChatCompletionsEndpoint, createCompletionsEndpoint } from '../src/index.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A model whose `generate` batches (one prompt each) wait for `release()`; `stream` yields 3 pieces. */
function gatedModel() {
  const waiting: Array<() => void> = [];
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> => {
      await new Promise<void>((resolve) => waiting.push(resolve));
      return inputs.map(() => ({
        text: 'abc',
        finish_reason: 'length',
        usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 },
      }));
    },
    { name: 'generate', maxBatchSize: 1, maxQueueSize: 1 },
  );
  const streamer = createStreamingBatcher(async function* (inputs: TextGenerationInput[]) {
    for (const text of ['a', 'b'])
      yield inputs.map((): TextGenerationChunk => ({ text, finish_reason: null, usage: null }));
    yield inputs.map((): TextGenerationChunk => ({
      text: 'c',
      finish_reason: 'length',
      usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
    }));
    yield inputs.map(() => END);
  });
  const model: CompletionsModel = { id: 'fake-model', generate, streamer, validate: createTextGenerationParser() };
  return { model, waiting, release: () => waiting.splice(0).forEach((resolve) => resolve()) };
}

async function listen(model: CompletionsModel, endpoint: 'completions' | 'chat' = 'completions'): Promise<string> {
  const registry = new Registry();
  const generation = createGenerationMetrics({ model: model.id, registry });
  const create = endpoint === 'chat' ? createChatCompletionsEndpoint : createCompletionsEndpoint;
  const completions = create(model, { generation });
  const metrics = metricsHandler(registry);
  const listening = createServer((req, res) => {
    if (req.url === '/metrics') return void metrics(req, res);
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => void completions(JSON.parse(body), res));
  });
  server = listening;
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
}

const post = (base: string, body: object) =>
  fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake-model', max_tokens: 3, ...body }),
  });

/** The value of one series in the exposition text. */
async function scrape(base: string): Promise<(series: string) => number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return (series) => {
    const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
    if (line === undefined) throw new Error(`No series ${series} in:\n${text}`);
    return Number(line.slice(series.length + 1));
  };
}

const model = 'model_name="fake-model"';

async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('generation metrics on /metrics', () => {
  it('counts running and waiting sequences, refusals by cause, tokens, queue time and end-to-end latency', async () => {
    const { model: fake, waiting, release } = gatedModel();
    const base = await listen(fake);
    const first = post(base, { prompt: 'one' });
    await until(() => waiting.length === 1);
    const second = post(base, { prompt: 'two' });
    await until(async () => (await scrape(base))(`${N.waiting}{${model}}`) === 1);
    const refused = await post(base, { prompt: 'three' });
    expect(refused.status).toBe(503);
    let value = await scrape(base);
    expect(value(`${N.running}{${model}}`)).toBe(1);
    expect(value(`${N.waiting}{${model}}`)).toBe(1);
    expect(value(`${N.refusals}{${model},cause="queue_full"}`)).toBe(1);
    expect(value(`${N.refusals}{${model},cause="overloaded"}`)).toBe(0);
    // Each batch waits for a release: keep releasing until both requests are answered.
    const pump = setInterval(release, 5);
    const answers = await Promise.all([first, second]).finally(() => clearInterval(pump));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    value = await scrape(base);
    expect(value(`${N.running}{${model}}`)).toBe(0);
    expect(value(`${N.waiting}{${model}}`)).toBe(0);
    expect(value(`${N.promptTokens}{${model}}`)).toBe(8);
    expect(value(`${N.generationTokens}{${model}}`)).toBe(6);
    expect(value(`${N.queueTime}_count{${model}}`)).toBe(2);
    expect(value(`${N.requestDuration}_count{${model}}`)).toBe(2);
    expect(value(`${N.requestDuration}_sum{${model}}`)).toBeGreaterThan(0);
    // Not streamed: no first-token moment was seen, so none is reported.
    expect(value(`${N.timeToFirstToken}_count{${model}}`)).toBe(0);
  });

  it('observes time to first token, time per output token, prefill and decode time of streamed requests', async () => {
    const base = await listen(gatedModel().model);
    const response = await post(base, { prompt: ['one', 'two'], stream: true });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('[DONE]');
    const value = await scrape(base);
    for (const name of [N.timeToFirstToken, N.timePerOutputToken, N.prefillTime, N.decodeTime, N.queueTime])
      expect(value(`${name}_count{${model}}`)).toBe(2);
    expect(value(`${N.timeToFirstToken}_sum{${model}}`)).toBeGreaterThan(0);
    expect(value(`${N.promptTokens}{${model}}`)).toBe(10);
    expect(value(`${N.generationTokens}{${model}}`)).toBe(6);
    expect(value(`${N.running}{${model}}`)).toBe(0);
  });

  it("records chat's choices as completions' prompts: whole and streamed, one sequence per choice", async () => {
    const { model: fake, release } = gatedModel();
    const base = await listen(fake, 'chat');
    const chat = (body: object) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'one' }], max_tokens: 3, ...body }),
      });
    const pump = setInterval(release, 5);
    const whole = await chat({}).finally(() => clearInterval(pump));
    expect(whole.status).toBe(200);
    const streamed = await chat({ n: 2, stream: true });
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain('[DONE]');
    const value = await scrape(base);
    // 1 whole choice + 2 streamed ones; only the streamed ones have a first token.
    expect(value(`${N.requestDuration}_count{${model}}`)).toBe(3);
    expect(value(`${N.queueTime}_count{${model}}`)).toBe(3);
    expect(value(`${N.timeToFirstToken}_count{${model}}`)).toBe(2);
    expect(value(`${N.promptTokens}{${model}}`)).toBe(4 + 2 * 5);
    expect(value(`${N.generationTokens}{${model}}`)).toBe(3 + 2 * 3);
    expect(value(`${N.running}{${model}}`)).toBe(0);
  });
});
