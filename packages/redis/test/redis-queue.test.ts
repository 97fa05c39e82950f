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

// What every transport does (batching, streaming, deadlines, cancellation, faults) is tested once for Redis and NATS
// in test/transport/; here, what is Redis's own: the Lua bound across replicas and the sweep by Redis's clock.
describe('createRedisQueue + createRedisWorker', () => {
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
  // The scale-out SSE flake: `XAUTOCLAIM` (consumer = this worker) takes idle entries whoever holds them. A worker's
  // own entries went idle while its pull waited `batchWaitTimeoutMs` for company (they were not refreshed until they
  // ran), or while a stalled event loop delayed their refresh; its claim then ran them a second time beside the first.
  it('never runs its own entry twice: not while its pull waits for company, not after its event loop stalls', async () => {
    const queue = nextQueue();
    const claimIdleMs = 200;
    const runs: number[] = [];
    const worker = createRedisWorker<number, number>({
      url: redis.url,
      queue,
      log: false,
      // Claims every 50 ms; a pull waits three claim periods for company.
      heartbeatMs: 50,
      claimIdleMs,
      batchWaitTimeoutMs: 3 * claimIdleMs,
      concurrency: 2,
      handlers: {
        double: async (inputs) => {
          runs.push(...inputs);
          if (inputs.includes(2)) {
            // A stalled machine: the event loop blocked for three claim periods (the refresh timer cannot run), then
            // the batch goes on long enough for the overdue claim timer to fire.
            const end = performance.now() + 3 * claimIdleMs;
            while (performance.now() < end);
            await new Promise((resolve) => setTimeout(resolve, 3 * claimIdleMs));
          }
          return inputs.map((input) => input * 2);
        },
      },
    });
    opened.push(worker);
    const a = replica(queue);
    await Promise.all([worker.ready, a.ready]);
    const double = a.batcher<number, number>('double');
    expect(await double(1)).toBe(2);
    expect(await double(2)).toBe(4);
    await until('the queue to be empty', async () => (await queueLength(queue)) === 0);
    // Each entry ran once, and none was counted as taken over.
    expect(runs).toEqual([1, 2]);
    expect(worker.stats()).toMatchObject({ batches: 2, items: 2, reclaimed: 0 });
  });
});
