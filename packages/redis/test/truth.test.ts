// What a web replica's batcher reports and admits: its stats are the workers' real batches (from their start
// notices and answers), the tuning it cannot change is refused, and a group is admitted all or none across the
// shared bound. Against a real redis-server of the test's own.
import {
  type QueueStatus,
  type RedisQueue,
  type RedisQueueOptions,
  type RedisWorkerOptions,
  createRedisQueue,
  createRedisWorker,
} from '@microbatch/redis';
import { type TestRedis, deferred, startRedisServer } from '@microbatch/test-kit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { queueLength as queueLengthOf, startChildReplica, startChildWorker, until } from './helpers.js';

let redis: TestRedis;
let queueNumber = 0;
const opened: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(() => redis.stop());
afterEach(async () => {
  await Promise.all(opened.splice(0).map((resource) => resource.close()));
});

function nextQueue(): string {
  queueNumber += 1;
  return `truth-${queueNumber}`;
}

function replica(queue: string, options: Partial<RedisQueueOptions> = {}): RedisQueue {
  const created = createRedisQueue({ url: redis.url, queue, ...options });
  opened.push({ close: () => created.close({ force: true }) });
  return created;
}

/** A worker whose `double` handler holds each batch until released, recording each batch's inputs. */
function heldWorker(queue: string, options: Partial<RedisWorkerOptions<number, number, number>> = {}) {
  const batches: number[][] = [];
  let gate = deferred();
  const started: Array<() => void> = [];
  const worker = createRedisWorker<number, number, number>({
    url: redis.url,
    queue,
    log: false,
    heartbeatMs: 100,
    handlers: {
      double: async (inputs) => {
        batches.push([...inputs]);
        started.shift()?.();
        await gate.promise;
        return inputs.map((input) => input * 2);
      },
    },
    streamingHandlers: {
      count: async function* (inputs) {
        batches.push([...inputs]);
        yield inputs;
      },
    },
    ...options,
  });
  opened.push(worker);
  return {
    worker,
    batches,
    release: () => {
      gate.resolve();
      gate = deferred();
    },
    nextStart: () => new Promise<void>((resolve) => started.push(resolve)),
  };
}

const queueLength = (queue: string): Promise<number> => queueLengthOf(redis.url, queue);

describe('a Redis queue batcher tells the truth', () => {
  it("reports the workers' batches: waiting, in flight, sizes, utilisation, execution, the shared queue", async () => {
    const queue = nextQueue();
    const held = heldWorker(queue, { maxBatchSize: 4 });
    const a = replica(queue, { heartbeatTtlMs: 1500 });
    await Promise.all([held.worker.ready, a.ready]);
    const double = a.batcher<number, number>('double');

    const first = held.nextStart();
    const running = double(1);
    await first;
    const group = double.callAll([2, 3, 4]);
    await until('the running batch to be announced', () => double.inFlightBatches === 1);
    expect([double.queueLength, double.inFlightBatches]).toEqual([3, 1]);
    await until(
      'a sample of the shared queue',
      () => double.stats().shared.waiting === 3 && double.stats().shared.running === 1,
    );
    expect(double.stats().shared).toMatchObject({ workersAlive: 1 });
    // The batching settings are the live workers' (read from their heartbeats), not a local copy.
    expect([double.maxBatchSize, double.batchWaitTimeoutMs, double.maxConcurrentBatches]).toEqual([4, 0, 1]);

    const second = held.nextStart();
    held.release();
    await second;
    held.release();
    expect([await running, await group]).toEqual([2, [4, 6, 8]]);
    expect(held.batches).toEqual([[1], [2, 3, 4]]);
    const stats = double.stats();
    expect(stats).toMatchObject({
      queueLength: 0,
      inFlightBatches: 0,
      batchesProcessed: 2,
      itemsProcessed: 4,
      lastBatchSize: 3,
      meanBatchSize: 2,
      batchUtilizationPercent: 50, // (1/4 + 3/4) / 2 of the worker's pull size
      succeeded: 4,
    });
    expect([stats.queueWaitMs.count, stats.executionMs.count]).toEqual([4, 2]);
    expect(stats.executionMs.max).toBeGreaterThanOrEqual(stats.executionMs.mean);
  });

  it('refuses to set the tuning that the workers own, naming it', () => {
    const double = replica(nextQueue()).batcher<number, number>('double');
    for (const name of ['maxBatchSize', 'batchWaitTimeoutMs', 'maxConcurrentBatches'] as const) {
      expect(() => {
        double[name] = 3;
      }).toThrow(new RegExp(`^\`${name}\` cannot be set on the Redis queue batcher \`double\``));
    }
    expect(() => {
      double.maxBatchSize = 3;
    }).toThrow(TypeError);
  });

  it('admits a group all or none under the global bound, also when two replicas race for the last room', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const [a, b] = [replica(queue, { maxQueueSize: 4 }), replica(queue, { maxQueueSize: 4 })];
    await Promise.all([held.worker.ready, a.ready, b.ready]);
    const [doubleA, doubleB] = [a.batcher<number, number>('double'), b.batcher<number, number>('double')];
    const first = held.nextStart();
    const running = doubleA(1);
    await first;

    // Four more do not fit beside the running one: none of them is queued.
    await expect(doubleA.callAll([10, 11, 12, 13])).rejects.toMatchObject({
      code: 'QUEUE_FULL',
      message: expect.stringContaining('no room for 4 items together'),
    });
    expect(await queueLength(queue)).toBe(1);
    expect(doubleA.stats().rejected.QUEUE_FULL).toBe(4);
    const refusedStreams = a.streamingBatcher<number, number>('count').streamAll([1, 2, 3, 4]);
    for (const stream of refusedStreams) await expect(stream.next()).rejects.toMatchObject({ code: 'QUEUE_FULL' });

    // Two groups of three race for the three places left: exactly one is admitted whole.
    const outcomes = Promise.allSettled([doubleA.callAll([2, 3, 4]), doubleB.callAll([5, 6, 7])]);
    await until('one group to be queued', async () => (await queueLength(queue)) === 4);
    const second = held.nextStart();
    held.release();
    await second;
    held.release();
    const settled = await outcomes;
    expect(await running).toBe(2);
    expect(settled.map((outcome) => outcome.status).sort()).toEqual(['fulfilled', 'rejected']);
    const admitted = settled.find((outcome) => outcome.status === 'fulfilled') as PromiseFulfilledResult<number[]>;
    expect(held.batches[1]?.map((input) => input * 2)).toEqual(admitted.value);
    expect(settled.find((outcome) => outcome.status === 'rejected')).toMatchObject({
      reason: { code: 'QUEUE_FULL' },
    });
  });
});

describe('Redis mode never strands a request', () => {
  it('refuses at admission with 503 UNAVAILABLE while no worker is alive, queueing nothing', async () => {
    const queue = nextQueue();
    const statuses: QueueStatus[] = [];
    // Deadlines and heartbeat ttl far beyond the test: a refusal that waited for either would hang it.
    const a = replica(queue, { timeoutMs: 600_000, heartbeatTtlMs: 600_000, onStatus: (s) => statuses.push(s) });
    await a.ready;
    const double = a.batcher<number, number>('double');
    await expect(double(1)).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      retryAfterSeconds: 1,
      message: expect.stringContaining(`No worker is serving the queue \`${queue}\``),
    });
    await expect(double.callAll([1, 2])).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await queueLength(queue)).toBe(0);
    expect(double.stats().rejected.UNAVAILABLE).toBe(3);
    await until('the first sample', () => statuses.some((status) => status.event === 'workers-down'));
    expect(statuses).toEqual([
      { event: 'broker-up', queue },
      { event: 'workers-down', queue, failed: 0 },
    ]);
  });

  it('without a grace, answers the waiting items 503 as soon as the last worker is gone (killed), long before their deadline', async () => {
    const queue = nextQueue();
    const statuses: QueueStatus[] = [];
    // `workerGraceMs: 0`: no wait for a replacement (the grace itself is tested on both brokers in test/transport/).
    const a = replica(queue, {
      timeoutMs: 600_000,
      heartbeatTtlMs: 1500,
      workerGraceMs: 0,
      onStatus: (s) => statuses.push(s),
    });
    await a.ready;
    const doomed = await startChildWorker({ REDIS_URL: redis.url, QUEUE: queue, MODE: 'hang' });
    const echo = a.batcher<string, string>('echo');
    const running = echo('a').catch((error: unknown) => error);
    expect(await doomed.batch(0)).toEqual(['a']);
    const queued = echo('b').catch((error: unknown) => error);
    await until('the second entry', async () => (await queueLength(queue)) === 2);
    doomed.process.child.kill('SIGKILL');
    for (const outcome of [await running, await queued]) {
      expect(outcome).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('No worker has served') });
    }
    await until('their entries to be deleted', async () => (await queueLength(queue)) === 0);
    // Started before any worker: each change once, from the first state seen.
    expect(statuses.map((status) => status.event)).toEqual(['broker-up', 'workers-down', 'workers-up', 'workers-down']);
    expect(statuses[3]).toEqual({ event: 'workers-down', queue, failed: 2 });
  });

  it('drops the entries of a replica killed mid-queue (not at their deadline): they never run nor hold the bound', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const b = replica(queue, { maxQueueSize: 4 });
    await Promise.all([held.worker.ready, b.ready]);
    const double = b.batcher<number, number>('double');
    const first = held.nextStart();
    const running = double(1);
    await first;
    // A replica in its own process queues three items (default 30 s deadlines), filling the bound, and is killed.
    const doomed = await startChildReplica({
      REDIS_URL: redis.url,
      QUEUE: queue,
      COUNT: '3',
      HEARTBEAT_TTL_MS: '2000',
    });
    await until('its three entries', async () => (await queueLength(queue)) === 4);
    await expect(double(2)).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    doomed.child.kill('SIGKILL');
    await doomed.exited;

    await until('its entries to be dropped', async () => (await queueLength(queue)) === 1);
    expect(held.worker.stats()).toMatchObject({ orphaned: 3, expired: 0 });
    const next = double(5);
    const second = held.nextStart();
    held.release();
    await second;
    held.release();
    expect([await running, await next]).toEqual([2, 10]);
    expect(held.batches).toEqual([[1], [5]]); // the dead replica's items never ran
  });
});
