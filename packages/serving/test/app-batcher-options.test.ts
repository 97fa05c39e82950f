// Every app serves `GET /?text=` through the service's own batcher: the options that batcher was made with
// (`maxLatencyMs`, `maxQueueSize`) decide on Nest exactly as on Express and Koa, and no second batcher of the app's own
// queues what the service would refuse. Through real servers, with a fake model whose batches wait for the test and
// an injected clock, so the latency estimate is exact.
import { waitFor } from '@microbatch/test-kit';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/index.js';
import { startTextCompletionApp as startExpress } from '../src/app/express/index.js';
import { startTextCompletionApp as startKoa } from '../src/app/koa/index.js';
import { startTextCompletionApp as startNest } from '../src/app/nest/index.js';
import { BATCH_MS, gatedService } from './gated-service.js';

const APPS = { express: startExpress, koa: startKoa, nest: startNest } as const;
let running: RunningServer | undefined;

afterEach(async () => {
  running?.server.closeAllConnections();
  await running?.shutdown();
  running = undefined;
});

describe.each(Object.keys(APPS) as Array<keyof typeof APPS>)('the %s app', (framework) => {
  it("refuses at once (503 OVERLOADED) what the service's batcher predicts late, queueing nothing else", async () => {
    const { service, generate, finishOne, gates } = gatedService({ maxLatencyMs: 2.5 * BATCH_MS });
    running = await APPS[framework](service, { port: 0, host: '127.0.0.1' });
    const get = () => fetch(`${running?.url}/?text=Once`);
    // Five batches of exactly BATCH_MS teach the batcher's latency estimate.
    for (let i = 0; i < 5; i += 1) {
      const answer = get();
      await finishOne();
      const response = await answer;
      expect(response.status).toBe(200);
      expect(response.headers.get('x-batch-size')).toBe('1');
      expect(await response.text()).toBe('Once done');
    }
    // A flood while one batch runs: one more fits in 2.5 batch times, the rest are refused before any is answered.
    const answered: Response[] = [];
    const flood = Array.from({ length: 6 }, () =>
      get().then((response) => {
        answered.push(response);
        return response;
      }),
    );
    const admitted = () => gates.length + generate.queueLength;
    const refusedCount = () => generate.stats().rejected.OVERLOADED;
    await waitFor('the flood admitted or refused', () => admitted() + refusedCount() === 6);
    await waitFor('the refusals answered', () => answered.length === refusedCount());
    // Only the requests the batcher admitted wait: the running one and at most one queued; no batch has ended.
    expect(admitted()).toBeLessThanOrEqual(2);
    expect(answered.length).toBeGreaterThanOrEqual(4);
    for (const response of answered) {
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('OVERLOADED');
    }
    const overloaded = [...answered];
    while (gates.length > 0 || generate.queueLength > 0) await finishOne();
    const statuses = await Promise.all(flood.map(async (pending) => (await pending).status));
    expect(statuses.filter((status) => status === 200).length + overloaded.length).toBe(6);
  });

  it("refuses past the service's maxQueueSize with 503 QUEUE_FULL", async () => {
    const { service, generate, finishOne } = gatedService({ maxQueueSize: 1 });
    running = await APPS[framework](service, { port: 0, host: '127.0.0.1' });
    const get = () => fetch(`${running?.url}/?text=Once`);
    const first = get();
    await waitFor('the first batch running', () => generate.inFlightBatches === 1);
    const second = get();
    await waitFor('one request queued', () => generate.queueLength === 1);
    const third = await get();
    expect(third.status).toBe(503);
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe('QUEUE_FULL');
    await finishOne();
    await finishOne();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
  });
});
