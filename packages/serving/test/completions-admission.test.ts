// A request of several prompts is admitted whole or refused whole (core's `callAll`): a refused request never starts
// some of its prompts and then cancels them. Through a real HTTP server, with a fake model whose batches wait for the
// test to release them.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBatcher, createStreamingBatcher, END } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createTextGenerationParser } from '@microbatch/inference';
import { afterEach, describe, expect, it } from 'vitest';
import { type CompletionsModel, createCompletionsEndpoint } from '../src/index.js';

const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
let server: Server | undefined;

afterEach(async () => {
  // Connections still waiting on a gate (a failed assertion) must not keep the server open.
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A model whose `generate` batches (one prompt each, one at a time) wait until `release()`. */
function gatedModel() {
  const seen: string[] = [];
  const waiting: Array<() => void> = [];
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> => {
      seen.push(...inputs.map((input) => input.prompt));
      await new Promise<void>((resolve) => waiting.push(resolve));
      return inputs.map((input) => ({ text: `<${input.prompt}>`, finish_reason: 'length', usage }));
    },
    { name: 'generate', maxBatchSize: 1, maxQueueSize: 3 },
  );
  const streamer = createStreamingBatcher(async function* (inputs: TextGenerationInput[]) {
    yield inputs.map((): TextGenerationChunk => ({ text: '', finish_reason: 'length', usage }));
    yield inputs.map(() => END);
  });
  const model: CompletionsModel = { id: 'fake', generate, streamer, validate: createTextGenerationParser() };
  const release = () => {
    for (const resolve of waiting.splice(0)) resolve();
  };
  return { model, generate, seen, release, waiting };
}

async function listen(model: CompletionsModel): Promise<string> {
  const completions = createCompletionsEndpoint(model);
  const listening = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => void completions(JSON.parse(body), res));
  });
  server = listening;
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}/v1/completions`;
}

const post = (url: string, prompt: string[]) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: 1 }),
  });

describe('the completions endpoint', () => {
  it('refuses a multi-prompt request whole when it does not fit, starting none of its prompts', async () => {
    const { model, generate, seen, release, waiting } = gatedModel();
    const url = await listen(model);
    // 2 prompts: the first runs (held by the gate), the second waits; 2 of the 3 queue places are left.
    const first = post(url, ['a ', 'b ']);
    while (waiting.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // 3 prompts would need 3 places: refused together, none queued and none cancelled.
    const refused = await post(url, ['x ', 'y ', 'z ']);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('QUEUE_FULL');
    expect(generate.stats().rejected).toMatchObject({ QUEUE_FULL: 3, CANCELLED: 0 });
    // 2 prompts fit: admitted together.
    const admitted = post(url, ['c ', 'd ']);
    while (generate.queueLength < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    for (let round = 0; round < 4; round += 1) {
      while (waiting.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      release();
    }
    const texts = async (response: Promise<Response>) =>
      ((await (await response).json()) as { choices: Array<{ text: string }> }).choices.map((choice) => choice.text);
    expect(await texts(first)).toEqual(['<a >', '<b >']);
    expect(await texts(admitted)).toEqual(['<c >', '<d >']);
    expect(seen).toEqual(['a ', 'b ', 'c ', 'd ']);
  });
});
