// `microbatch serve --queue ... --max-latency-ms`: a web replica refuses at once (OVERLOADED, 503 + Retry-After)
// what it predicts would be answered too late, instead of queueing it. Against a real redis-server and a real
// nats-server -js (the queue and worker the CLI opens for the URL's scheme), with a worker whose batches wait for the
// test to release them.
import type { FleetLoad } from '@microbatch/core';
import type { TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { TEXT_COMPLETION_HANDLERS, createQueuedTextCompletionService } from '@microbatch/serving';
import type { TextCompletionService } from '@microbatch/serving';
import { pollUntil, startNatsServer, startRedisServer, waitFor } from '@microbatch/test-kit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openQueue, startQueueWorker } from '../src/queue-transport.js';

const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
/** How long the test holds each warm-up batch: the worker's fit learns at least this per batch. */
const HOLD_MS = 40;
const MAX_LATENCY_MS = 100;
const FLOOD = 10;

const brokers = [
  { name: 'Redis', start: startRedisServer },
  { name: 'NATS', start: startNatsServer },
] as const;
const fail = (message: string): never => {
  throw new Error(message);
};
let url: string;
const opened: Array<{ close(): Promise<void> }> = [];

afterEach(async () => {
  for (const resource of opened.splice(0).reverse()) await resource.close();
});

/** One worker thread's worth of model: one request a batch, each held until the test releases it. */
async function heldWorker(queue: string): Promise<{ gates: Array<() => void> }> {
  const gates: Array<() => void> = [];
  const worker = await startQueueWorker<TextGenerationInput, TextGenerationOutput, never>(
    url,
    queue,
    {
      log: false,
      heartbeatMs: 100,
      maxBatchSize: 1,
      concurrency: 1,
      handlers: {
        [TEXT_COMPLETION_HANDLERS.generate]: async (inputs) => {
          await new Promise<void>((resolve) => gates.push(resolve));
          return inputs.map(() => ({ text: 'done', finish_reason: 'length', usage }));
        },
      },
    },
    fail,
  );
  opened.push(worker);
  await worker.ready;
  return { gates };
}

async function replica(
  queue: string,
  maxLatencyMs?: number,
): Promise<TextCompletionService & { readonly queue: { load(): FleetLoad } }> {
  const sharedQueue = await openQueue(url, queue, {}, fail);
  const service = createQueuedTextCompletionService(sharedQueue, {
    id: queue,
    maxLatencyMs,
  });
  opened.push(service);
  await service.ready;
  const { ok } = await pollUntil(
    async () => service.isReady(),
    (ready) => ready,
    10_000,
  );
  expect(ok).toBe(true);
  return Object.assign(service, { queue: sharedQueue });
}

/** Five requests, one at a time, each held {@link HOLD_MS}: what the replica's estimate learns from. */
async function warmUp(service: TextCompletionService, gates: Array<() => void>): Promise<void> {
  const input = service.validate({ prompt: 'Once ', max_tokens: 1 });
  for (let i = 0; i < 5; i += 1) {
    const answer = service.generate(input);
    await waitFor('the batch running', () => gates.length === 1);
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
    gates.shift()?.();
    expect((await answer).text).toBe('done');
  }
}

/** Sends {@link FLOOD} requests at once; returns them and the codes of those refused, as they come. */
function flood(service: TextCompletionService) {
  const input = service.validate({ prompt: 'Once ', max_tokens: 1 });
  const refused: string[] = [];
  const retryAfter: unknown[] = [];
  const calls = Array.from({ length: FLOOD }, () =>
    service.generate(input).catch((error: { code?: string; retryAfterSeconds?: number }) => {
      refused.push(error.code ?? 'unknown');
      retryAfter.push(error.retryAfterSeconds);
      return undefined;
    }),
  );
  return { calls, refused, retryAfter };
}

describe.each(brokers)('a web replica with maxLatencyMs (--max-latency-ms) on $name', (broker) => {
  let stop: () => Promise<void>;
  beforeAll(async () => {
    const started = await broker.start();
    url = started.url;
    stop = () => started.stop();
  });
  afterAll(() => stop());

  it('refuses at once what it predicts late, and answers everything it admitted', async () => {
    const { gates } = await heldWorker('latency');
    const service = await replica('latency', MAX_LATENCY_MS);
    await warmUp(service, gates);
    // The worker publishes core's latency fit over its batches; the replica predicts with it once it has sampled it.
    await waitFor(
      "the worker's fit, as the replica samples it",
      () => (service.queue.load().workers[0]?.fit?.samples ?? 0) >= 5,
    );
    const { calls, refused, retryAfter } = flood(service);
    // The refusals come while the worker still holds its first batch: nothing was answered, nothing queued for them.
    await waitFor('a refusal', () => refused.length > 0);
    expect(refused.every((code) => code === 'OVERLOADED')).toBe(true);
    expect(retryAfter.every((seconds) => typeof seconds === 'number' && seconds >= 1)).toBe(true);
    const admitted = FLOOD - refused.length;
    expect(admitted).toBeLessThan(FLOOD);
    let answered = 0;
    while (answered < admitted) {
      await waitFor('the next batch running', () => gates.length === 1);
      gates.shift()?.();
      answered += 1;
    }
    const results = await Promise.all(calls);
    expect(results.filter((result) => result?.text === 'done')).toHaveLength(admitted);
    expect(refused).toHaveLength(FLOOD - admitted);
  });

  it('without it, admits the whole flood into the queue (the control)', async () => {
    const { gates } = await heldWorker('control');
    const service = await replica('control');
    await warmUp(service, gates);
    const { calls, refused } = flood(service);
    for (let answered = 0; answered < FLOOD; answered += 1) {
      await waitFor('the next batch running', () => gates.length === 1);
      gates.shift()?.();
    }
    expect((await Promise.all(calls)).every((result) => result?.text === 'done')).toBe(true);
    expect(refused).toEqual([]);
  });
});
