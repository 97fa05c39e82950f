import { BatchError } from '@microbatch/core';
import {
  type RedisQueue,
  type RedisWorker,
  type RedisWorkerOptions,
  createRedisQueue,
  createRedisWorker,
} from '@microbatch/redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestRedis, deferred, startRedisServer } from '@microbatch/test-kit';
import { inspect, queueLength as queueLengthOf, until } from './helpers.js';

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

/** A fresh queue name per test, so tests never see each other's entries. */
function nextQueue(): string {
  queueNumber += 1;
  return `test-${queueNumber}`;
}

function replica(queue: string, options: Partial<Parameters<typeof createRedisQueue>[0]> = {}): RedisQueue {
  const created = createRedisQueue({ url: redis.url, queue, ...options });
  opened.push({ close: () => created.close({ force: true }) });
  return created;
}

/** A worker whose handler holds its batches until released, recording each batch's inputs. */
function heldWorker(queue: string, options: Partial<RedisWorkerOptions<number, number, number>> = {}) {
  const batches: number[][] = [];
  let gate = deferred();
  const started: Array<() => void> = [];
  // Steps of the `slow` stream that reached the gate, and how many of them were let through.
  let parked = 0;
  let passed = 0;
  const worker: RedisWorker = createRedisWorker<number, number, number>({
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
        for (let step = 0; step < 3; step += 1) yield inputs.map((input) => input + step);
      },
      slow: async function* (inputs) {
        batches.push([...inputs]);
        for (let step = 0; step < 3; step += 1) {
          if (step > 0) {
            parked += 1;
            await gate.promise;
          }
          yield inputs.map((input) => input + step);
        }
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
    /** Lets the `slow` stream's next step through, once it is waiting at the gate. */
    step: async () => {
      await until('a step at the gate', () => parked > passed);
      passed += 1;
      gate.resolve();
      gate = deferred();
    },
    /** Resolves when the next batch starts. */
    nextStart: () => new Promise<void>((resolve) => started.push(resolve)),
  };
}

function queueLength(queue: string): Promise<number> {
  return queueLengthOf(redis.url, queue);
}

describe('createRedisQueue + createRedisWorker', () => {
  it("batches two replicas' items together on one worker, with one global batch id", async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const [a, b] = [replica(queue), replica(queue)];
    await Promise.all([held.worker.ready, a.ready, b.ready]);
    const [doubleA, doubleB] = [a.batcher<number, number>('double'), b.batcher<number, number>('double')];

    // The first item occupies the worker's only slot; the next four wait in Redis meanwhile.
    const first = held.nextStart();
    const ids: unknown[] = [];
    const results = [doubleA(1)];
    await first;
    for (const [batcher, input] of [
      [doubleA, 2],
      [doubleB, 3],
      [doubleA, 4],
      [doubleB, 5],
    ] as const) {
      results.push(batcher(input, { onDispatch: (info) => ids.push(info.batchId) }));
    }
    await until('the four entries to be queued', async () => (await queueLength(queue)) === 5);
    held.release();
    const second = held.nextStart();
    await second;
    held.release();

    expect(await Promise.all(results)).toEqual([2, 4, 6, 8, 10]);
    expect(held.batches.map((batch) => [...batch].sort((x, y) => x - y))).toEqual([[1], [2, 3, 4, 5]]);
    expect(new Set(ids)).toEqual(new Set([`${held.worker.workerId}-2`]));
    expect(held.worker.stats()).toMatchObject({ batches: 2, items: 5, meanBatchSize: 2.5 });
    expect(await queueLength(queue)).toBe(0); // answered entries are acknowledged and deleted
  });

  it('streams each item its own values through the queue', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const a = replica(queue);
    await Promise.all([held.worker.ready, a.ready]);
    const count = a.streamingBatcher<number, number>('count');
    const dispatched: unknown[] = [];
    const collect = async (input: number) => {
      const values: number[] = [];
      for await (const value of count.stream(input, { onDispatch: (info) => dispatched.push(info.batchSize) }))
        values.push(value);
      return values;
    };
    expect(await Promise.all([collect(10), collect(20)])).toEqual([
      [10, 11, 12],
      [20, 21, 22],
    ]);
    expect(await count(5)).toEqual([5, 6, 7]);
    expect(dispatched).toHaveLength(2); // once per streamed item
  });

  it('drops a running stream whose reader stops (client disconnect); the worker carries on', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const a = replica(queue);
    await Promise.all([held.worker.ready, a.ready]);
    const slow = a.streamingBatcher<number, number>('slow');
    const values: number[] = [];
    for await (const value of slow.stream(7)) {
      values.push(value);
      break; // the client went away after the first token
    }
    expect(values).toEqual([7]);
    expect([slow.queueLength, slow.stats().cancelled]).toEqual([0, 1]);
    await held.step();
    await held.step();
    // The worker's later steps go nowhere and harm nothing: the next stream is served whole.
    const next = slow.stream(1);
    const collected: number[] = [];
    const reading = (async () => {
      for await (const value of next) collected.push(value);
    })();
    await until('the second stream to start', () => collected.length === 1);
    await held.step();
    await until('the second step', () => collected.length === 2);
    await held.step();
    await reading;
    expect(collected).toEqual([1, 2, 3]);
  });

  it('refuses at once with 503 QUEUE_FULL past the global bound on queued entries', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const [a, b] = [replica(queue, { maxQueueSize: 2 }), replica(queue, { maxQueueSize: 2 })];
    await Promise.all([held.worker.ready, a.ready, b.ready]);
    const started = held.nextStart();
    const running = a.batcher<number, number>('double')(1);
    await started;
    const queued = b.batcher<number, number>('double')(2);
    await until('two entries', async () => (await queueLength(queue)) === 2);
    const refused = a.batcher<number, number>('double')(3);
    await expect(refused).rejects.toMatchObject({ code: 'QUEUE_FULL', retryAfterSeconds: 1 });
    held.release();
    await held.nextStart();
    held.release();
    expect(await Promise.all([running, queued])).toEqual([2, 4]);
    expect(a.batcher('double').stats().rejected.QUEUE_FULL).toBe(1);
  });

  it('expires an item whose deadline passes while queued: 504 on the replica, never run by the worker', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const a = replica(queue);
    await Promise.all([held.worker.ready, a.ready]);
    const double = a.batcher<number, number>('double');
    const started = held.nextStart();
    const running = double(1);
    await started;
    await expect(double(2, { timeoutMs: 20 })).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' });
    await until('the expired entry to be deleted', async () => (await queueLength(queue)) === 1);
    // The replica deleted its entry, or a worker's sweep dropped it first: either way it never runs.
    const expiredBefore = held.worker.stats().expired;
    // An entry nobody deletes (its replica died): a worker's sweep drops it by its deadline (Redis's clock).
    const client = await inspect(redis.url);
    await client.sendCommand([
      'XADD',
      `microbatch:${queue}:requests`,
      '*',
      'i',
      'z',
      'h',
      'double',
      'r',
      'gone',
      't',
      '1',
      's',
      '0',
      'p',
      '3',
    ]);
    client.destroy();
    // Only the running entry left, and the worker counted the drop.
    await until(
      'the expired entry to be dropped',
      async () => (await queueLength(queue)) === 1 && held.worker.stats().expired > expiredBefore,
    );
    held.release();
    expect(await running).toBe(2);
    await until('the stream to be empty', async () => (await queueLength(queue)) === 0);
    expect(held.batches).toEqual([[1]]);
  });

  it('cancels a queued item when its caller goes away (client disconnect): removed, never run', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const a = replica(queue);
    await Promise.all([held.worker.ready, a.ready]);
    const double = a.batcher<number, number>('double');
    const started = held.nextStart();
    const running = double(1);
    await started;
    const controller = new AbortController();
    const cancelled = double(2, { signal: controller.signal });
    await until('the second entry', async () => (await queueLength(queue)) === 2);
    controller.abort(new DOMException('The client closed the connection', 'AbortError'));
    await expect(cancelled).rejects.toMatchObject({ name: 'AbortError' });
    await until('the cancelled entry to be removed', async () => (await queueLength(queue)) === 1);
    held.release();
    expect(await running).toBe(2);
    const next = held.nextStart();
    const third = double(3);
    await next;
    held.release();
    expect(await third).toBe(6);
    expect(held.batches).toEqual([[1], [3]]);
    expect(double.stats().cancelled).toBe(1);
  });

  it('is ready only while connected with a live worker', async () => {
    const queue = nextQueue();
    const a = replica(queue, { heartbeatTtlMs: 500 });
    await a.ready;
    expect([a.isConnected(), await a.workersAlive(), await a.isReady()]).toEqual([true, 0, false]);
    const held = heldWorker(queue);
    await held.worker.ready;
    expect(await a.isReady()).toBe(true);
    await held.worker.close();
    expect(await a.isReady()).toBe(false); // a worker that stops says so at once
  });

  it('answers 503 UNAVAILABLE at once while Redis is down, fails the items waiting, and recovers when it returns', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const a = replica(queue);
    await Promise.all([held.worker.ready, a.ready]);
    const double = a.batcher<number, number>('double');
    const started = held.nextStart();
    const waiting = double(1).catch((caught: unknown) => caught);
    await started;

    await redis.kill();
    const error = await waiting;
    expect(error).toBeInstanceOf(BatchError);
    expect(error).toMatchObject({ code: 'UNAVAILABLE', retryAfterSeconds: 1 });
    await expect(double(2)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await a.isReady()).toBe(false);

    held.release(); // the worker's answer has nowhere to go; it must not crash the worker
    await redis.restart();
    // Both sides reconnect; the worker recreates the consumer group the restart lost.
    await until('the replica to see Redis and the worker again', () => a.isReady());
    const recovered = double(21);
    await held.nextStart();
    held.release();
    expect(await recovered).toBe(42);
  });
});
