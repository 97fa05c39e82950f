// Workers that die: a worker SIGKILLed mid-batch, and an entry that kills every worker that runs it. Workers run in
// their own processes (test/fixtures/crashing-worker.ts) so that they can really be killed.
import { type RedisQueue, createRedisQueue, createRedisWorker } from '@microbatch/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestRedis, startRedisServer } from '@microbatch/test-kit';
import { startChildWorker } from './helpers.js';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(() => redis.stop());

describe('worker failures', () => {
  it('answers every item of a worker SIGKILLed mid-batch through another worker (0 lost)', async () => {
    const queue = 'killed-worker';
    // A worker is expected back for a minute: the items wait for the rescuer instead of failing with 503.
    const replica: RedisQueue = createRedisQueue({ url: redis.url, queue, heartbeatTtlMs: 60_000 });
    await replica.ready;
    const echo = replica.batcher<string, string>('echo');
    const inputs = ['a', 'b', 'c', 'd', 'e'];
    const doomed = await startChildWorker({ REDIS_URL: redis.url, QUEUE: queue, MODE: 'hang' });
    // One group, added by one script: the doomed worker's waiting pull takes them all as one batch.
    const answers = echo.callAll(inputs);
    expect(await doomed.batch(0)).toEqual(inputs);
    doomed.process.child.kill('SIGKILL');
    await doomed.process.exited;
    const rescuer = createRedisWorker<string, string>({
      url: redis.url,
      queue,
      claimIdleMs: 300,
      heartbeatMs: 100,
      log: false,
      handlers: { echo: async (batch) => batch.map((input) => `rescued:${input}`) },
    });
    expect(await answers).toEqual(inputs.map((input) => `rescued:${input}`));
    expect(rescuer.stats()).toMatchObject({ reclaimed: inputs.length, batches: 1 });
    // The items moved from the doomed worker's batch to the rescuer's: both started them, one answered.
    expect(echo.stats()).toMatchObject({ batchesProcessed: 2, inFlightBatches: 0, queueLength: 0, succeeded: 5 });
    await rescuer.close();
    await replica.close();
  });

  it('answers an entry that crashes every worker with an error after maxDeliveries deliveries', async () => {
    const queue = 'poison';
    // Workers are expected back for a minute: the item waits for each replacement instead of failing with 503.
    const replica = createRedisQueue({ url: redis.url, queue, heartbeatTtlMs: 60_000 });
    await replica.ready;
    const echo = replica.batcher<string, string>('echo');
    const env = { REDIS_URL: redis.url, QUEUE: queue, MODE: 'poison', CLAIM_IDLE_MS: '200', MAX_DELIVERIES: '2' };
    let poisoned: Promise<unknown> | undefined;
    let crashes = 0;
    let outcome: unknown;
    // Each worker that takes the entry dies; a replacement takes it over, until one gives up on it.
    for (let attempt = 0; attempt < 6 && outcome === undefined; attempt += 1) {
      const worker = await startChildWorker(env);
      // Sent once a worker is alive (with none, it would be refused at once).
      poisoned ??= echo('poison').then(
        () => 'answered',
        (error: unknown) => error,
      );
      const settled: 'crashed' | { value: unknown } = await Promise.race([
        worker.process.exited.then(() => 'crashed' as const),
        poisoned.then((value) => ({ value })),
      ]);
      if (settled === 'crashed') crashes += 1;
      else {
        outcome = settled.value;
        await worker.process.stop();
      }
    }
    expect(crashes).toBe(2);
    expect(outcome).toMatchObject({ code: 'HANDLER_ERROR', expose: false });
    await replica.close();
  });
});
