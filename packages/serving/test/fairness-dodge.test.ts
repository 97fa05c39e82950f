// Fairness that cannot be dodged: a client that sends half its requests under fresh random OpenAI `user` values
// gains nothing over an honest client (`user: "alice"`), because the fairness key is the client (its address, or
// the operator's trusted header), never `user`. Figures are counts of admitted requests while the model is held, so
// the outcome does not depend on timing.
import { randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBatcher, createStreamingBatcher, END } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createTextGenerationParser } from '@microbatch/inference';
import { afterEach, describe, expect, it } from 'vitest';
import { type CompletionsModel, clientKeyFromHeader, createCompletionsEndpoint } from '../src/index.js';

const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
const MAX_QUEUE = 40;
const PER_CLIENT = 60;
let server: Server | undefined;
let release: (() => void) | undefined;

afterEach(async () => {
  release?.();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A model whose batches wait until the test releases them (and run at once after): the queue fills and admission
 * decides who gets in. */
function heldModel(): CompletionsModel {
  const waiting: Array<() => void> = [];
  let released = false;
  release = () => {
    released = true;
    for (const resolve of waiting.splice(0)) resolve();
  };
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> => {
      if (!released) await new Promise<void>((resolve) => waiting.push(resolve));
      return inputs.map(() => ({ text: 'ok', finish_reason: 'length', usage }));
    },
    { name: 'generate', maxBatchSize: 1, maxQueueSize: MAX_QUEUE },
  );
  const streamer = createStreamingBatcher(async function* (inputs: TextGenerationInput[]) {
    yield inputs.map((): TextGenerationChunk => ({ text: '', finish_reason: 'length', usage }));
    yield inputs.map(() => END);
  });
  return { id: 'fake', generate, streamer, validate: createTextGenerationParser() };
}

async function listen(endpoint: ReturnType<typeof createCompletionsEndpoint>): Promise<string> {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => void endpoint(JSON.parse(body), res));
  });
  const listening = server;
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}/v1/completions`;
}

/** Sends one request as `client` (in `X-Client`) for `user`; resolves to its final status. */
function post(url: string, client: string, user: string): Promise<number> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-client': client },
    body: JSON.stringify({ prompt: 'hi ', max_tokens: 1, user }),
  }).then(async (response) => {
    await response.arrayBuffer();
    return response.status;
  });
}

/** Items the batcher has decided on: queued, running (one per batch here) or refused. */
function decided(model: CompletionsModel): number {
  const stats = model.generate.stats();
  const refused = Object.values(stats.rejected).reduce((sum, count) => sum + count, 0);
  return stats.queueLength + stats.inFlightBatches + refused;
}

describe('fairness against a client that invents `user` values', () => {
  it.each([
    ['the client address (both clients on 127.0.0.1 share it)', undefined],
    ['a trusted header naming the client', 'x-client'],
  ] as const)('keyed by %s, the honest client gets at least 0.8x of an equal share', async (_name, header) => {
    const model = heldModel();
    const url = await listen(
      createCompletionsEndpoint(model, header === undefined ? {} : { clientKey: clientKeyFromHeader(header) }),
    );
    const sent: { client: 'alice' | 'dodger'; status: Promise<number> }[] = [];
    // One request at a time, each decided (queued or refused) before the next, alternating the two clients.
    for (let i = 0; i < PER_CLIENT; i += 1) {
      const dodge = i % 2 === 0 ? randomUUID() : 'mallory';
      for (const [client, user] of [
        ['dodger', dodge],
        ['alice', 'alice'],
      ] as const) {
        sent.push({ client, status: post(url, client, user) });
        for (let spin = 0; decided(model) < sent.length; spin += 1) {
          if (spin === 2000) throw new Error(`stuck: ${JSON.stringify(model.generate.stats())} sent ${sent.length}`);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      }
    }
    release?.();
    const statuses = await Promise.all(sent.map(async ({ client, status }) => ({ client, status: await status })));
    const count = (client: string) => statuses.filter((sent) => sent.client === client && sent.status === 200).length;
    const refusals = statuses.filter((sent) => sent.status === 503).length;
    // The held model filled the queue: the rest were refused, and admission had to share the places out.
    expect(count('alice') + count('dodger') + refusals).toBe(2 * PER_CLIENT);
    expect(refusals).toBeGreaterThan(0);
    const equalShare = (count('alice') + count('dodger')) / 2;
    console.log(
      `fairness (${header ?? 'address'}): alice ${count('alice')}, dodger ${count('dodger')}, refused ${refusals}`,
    );
    expect(count('alice')).toBeGreaterThanOrEqual(0.8 * equalShare);
  });
});
