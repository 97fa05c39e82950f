// Fair shares between two real clients, counted, never timed: a heavy client on 127.0.0.2 floods a server whose
// model is held (so the queue fills and admission decides who gets in), then a light client on 127.0.0.3 sends a
// few requests: every one of them is admitted and answered, because the light client is far below its fair share
// whatever the heavy one sends. The same with two API keys from one address (the key's name is the fairness key).
import { request } from 'node:http';
import { createBatcher } from '@microbatch/core';
import type { TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer, TextCompletionAppOptions, TextCompletionService } from '../src/index.js';
import { startTextCompletionApp } from '../src/app/express/index.js';
import { FAKE_USAGE as usage, fakeTextService } from './fake-text-service.js';

const MAX_QUEUE = 40;
const HEAVY = 60;
const LIGHT = 10;
let running: RunningServer | undefined;
let release: (() => void) | undefined;

afterEach(async () => {
  release?.();
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});

/** A service whose batches (one request each) wait until the test releases them. */
function heldService(): TextCompletionService {
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
  return fakeTextService(generate);
}

/** One completion from the loopback address `from` (with `key`); resolves to its status. */
function post(url: string, from: string, key?: string): Promise<number> {
  const target = new URL(`${url}/v1/completions`);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', localAddress: from },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    if (key !== undefined) req.setHeader('authorization', `Bearer ${key}`);
    req.end(JSON.stringify({ prompt: 'hi ', max_tokens: 1, user: `invented-${Math.random()}` }));
  });
}

/** Items the batcher has decided on: queued, running or refused. */
function decided(service: TextCompletionService): number {
  const stats = service.generate.stats();
  const refused = Object.values(stats.rejected).reduce((sum, count) => sum + count, 0);
  return stats.queueLength + stats.inFlightBatches + refused;
}

/** Sends each request once the one before it was decided; returns their statuses. */
async function sendDecided(service: TextCompletionService, sends: ReadonlyArray<() => Promise<number>>) {
  const statuses: Promise<number>[] = [];
  const start = decided(service);
  for (const send of sends) {
    statuses.push(send());
    for (let spin = 0; decided(service) < start + statuses.length; spin += 1) {
      if (spin === 5000) throw new Error(`stuck: ${JSON.stringify(service.generate.stats())}`);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
  return statuses;
}

async function scenario(
  options: TextCompletionAppOptions,
  heavy: (url: string) => Promise<number>,
  light: (url: string) => Promise<number>,
) {
  const service = heldService();
  running = await startTextCompletionApp(service, { port: 0, host: '127.0.0.1' }, options);
  const { url } = running;
  const heavyStatuses = await sendDecided(
    service,
    Array.from({ length: HEAVY }, () => () => heavy(url)),
  );
  const lightStatuses = await sendDecided(
    service,
    Array.from({ length: LIGHT }, () => () => light(url)),
  );
  release?.();
  const count = async (statuses: Promise<number>[], status: number) =>
    (await Promise.all(statuses)).filter((value) => value === status).length;
  return {
    heavy200: await count(heavyStatuses, 200),
    heavy503: await count(heavyStatuses, 503),
    light200: await count(lightStatuses, 200),
  };
}

describe('a light client under a heavy one', () => {
  it('answers every light request from 127.0.0.3 while 127.0.0.2 floods a full queue (invented `user`s)', async () => {
    const result = await scenario(
      {},
      (url) => post(url, '127.0.0.2'),
      (url) => post(url, '127.0.0.3'),
    );
    expect(result.light200).toBe(LIGHT);
    // The heavy client filled the queue alone; past it, it was refused.
    expect(result.heavy200 + result.heavy503).toBe(HEAVY);
    expect(result.heavy503).toBeGreaterThan(0);
  });

  it('keys fair shares by API key name: two keys from one address', async () => {
    const keys = [
      { name: 'heavy', key: 'sk-heavy-1' },
      { name: 'light', key: 'sk-light-1' },
    ];
    const result = await scenario(
      { apiKeys: keys },
      (url) => post(url, '127.0.0.2', 'sk-heavy-1'),
      (url) => post(url, '127.0.0.2', 'sk-light-1'),
    );
    expect(result.light200).toBe(LIGHT);
    expect(result.heavy503).toBeGreaterThan(0);
  });

  it('without keys, two clients on one address share one share: the light one is refused too', async () => {
    // The counter-check: what the two tests above count depends on the fairness key, not on luck.
    const result = await scenario(
      {},
      (url) => post(url, '127.0.0.2'),
      (url) => post(url, '127.0.0.2'),
    );
    expect(result.light200).toBeLessThan(LIGHT);
  });
});
