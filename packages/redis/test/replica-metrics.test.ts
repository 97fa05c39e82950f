// A web replica's /metrics: its batcher emits `batchStart` / `batchEnd` for the workers' batches that ran its items
// (as the workers reported them), so @microbatch/prometheus's histograms describe what ran. Two replicas and one
// worker against a real redis-server of the test's own.
import { instrumentBatcher, metricsHandler } from '@microbatch/prometheus';
import { type RedisQueue, createRedisQueue, createRedisWorker } from '@microbatch/redis';
import { type TestRedis, deferred, listen, samplesOf, startRedisServer } from '@microbatch/test-kit';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueLength, until } from './helpers.js';

let redis: TestRedis;
const opened: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  for (const resource of opened.splice(0).reverse()) await resource.close();
  await redis.stop();
});

/** A replica with its own registry served on GET /metrics, as `microbatch serve --queue` does. */
async function replica(queue: string) {
  const created: RedisQueue = createRedisQueue({ url: redis.url, queue });
  opened.push({ close: () => created.close({ force: true }) });
  await created.ready;
  const double = created.batcher<number, number>('double');
  const registry = new Registry();
  instrumentBatcher(double, { registry });
  const server = await listen((req, res) => void metricsHandler(registry)(req, res));
  opened.push(server);
  const scrape = async (metric: string): Promise<string[]> =>
    samplesOf(await (await fetch(`${server.url}/metrics`)).text(), metric);
  return { double, scrape };
}

/** The `_sum` and `_count` of a histogram's series, from its sample lines. */
function sumAndCount(samples: readonly string[]): [number, number] {
  const value = (suffix: string): number =>
    Number(
      samples
        .find((line) => line.includes(`${suffix}{`))
        ?.split(' ')
        .at(-1) ?? Number.NaN,
    );
  return [value('_sum'), value('_count')];
}

describe("a web replica's /metrics", () => {
  it("records the workers' batches: their whole size, the replica's queue waits, the execution time they reported", async () => {
    const queue = 'metrics';
    const batches: number[][] = [];
    const gate = deferred();
    const worker = createRedisWorker<number, number>({
      url: redis.url,
      queue,
      maxBatchSize: 4,
      heartbeatMs: 100,
      log: false,
      handlers: {
        double: async (inputs) => {
          batches.push([...inputs]);
          await gate.promise;
          return inputs.map((input) => input * 2);
        },
      },
    });
    opened.push(worker);
    await worker.ready;
    const a = await replica(queue);
    const b = await replica(queue);

    // Batch 1: replica A's three items (one ENQUEUE script, so one pull), held while the next two queue.
    const first = a.double.callAll([1, 2, 3]);
    await until('the first batch to start', () => batches.length === 1);
    // Batch 2: one item of each replica, queued while the worker's only slot is busy, so pulled together.
    const second = [a.double(4), b.double(5)];
    await until('both items to queue', async () => (await queueLength(redis.url, queue)) === 5);
    gate.resolve();
    expect(await first).toEqual([2, 4, 6]);
    expect(await Promise.all(second)).toEqual([8, 10]);
    expect(batches.map((batch) => batch.length)).toEqual([3, 2]);

    // A ran in both batches: sizes 3 and 2 (the whole worker batch, B's item too), four items of its own.
    expect(await a.scrape('microbatch_batches_total')).toEqual(['microbatch_batches_total{name="double"} 2']);
    expect(await a.scrape('microbatch_items_total')).toEqual(['microbatch_items_total{name="double"} 4']);
    expect(sumAndCount(await a.scrape('microbatch_batch_size'))).toEqual([5, 2]);
    expect(sumAndCount(await a.scrape('microbatch_batch_utilization_percent'))).toEqual([75 + 50, 2]);
    expect(sumAndCount(await a.scrape('microbatch_queue_wait_ms'))[1]).toBe(4);
    // The execution times are the ones the worker reported: the replica's stats hold the same figures.
    const [executionSum, executions] = sumAndCount(await a.scrape('microbatch_batch_execution_ms'));
    expect(executions).toBe(2);
    expect(executionSum).toBeGreaterThan(0);
    expect(executionSum).toBeCloseTo(a.double.stats().executionMs.sum, 6);
    // B ran in the second batch only: its size is 2, with one item of B's.
    expect(await b.scrape('microbatch_batches_total')).toEqual(['microbatch_batches_total{name="double"} 1']);
    expect(await b.scrape('microbatch_items_total')).toEqual(['microbatch_items_total{name="double"} 1']);
    expect(sumAndCount(await b.scrape('microbatch_batch_size'))).toEqual([2, 1]);
    expect(sumAndCount(await b.scrape('microbatch_batch_execution_ms'))[1]).toBe(1);
  });
});
