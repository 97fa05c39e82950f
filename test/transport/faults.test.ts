// The transport fault suite, run against every transport (drivers.ts: Redis, NATS JetStream), each on its own broker:
// batching across replicas, streaming, deadlines, cancellation and disconnects, refusals at admission, a worker
// SIGKILLed mid-batch, an entry that crashes every worker, and the broker itself restarting. Workers that must really
// die run in their own processes (fixtures/child-worker.ts).
import { BatchError } from '@microbatch/core';
import { deferred } from '@microbatch/test-kit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type ReplicaOptions,
  type TestBroker,
  type TestQueue,
  type TestWorker,
  type WorkerOptions,
  drivers,
  startChildWorker,
  until,
} from './drivers.js';

// `TRANSPORT=nats pnpm vitest run test/transport` runs one transport's half.
const selected = drivers.filter((driver) => (process.env.TRANSPORT ?? driver.name) === driver.name);

describe.each(selected)('transport: $name', (driver) => {
  let broker: TestBroker;
  let queueNumber = 0;
  const opened: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    broker = await driver.startBroker();
  });
  afterAll(() => broker.stop());
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((resource) => resource.close()));
  });

  /** A fresh queue name per test, so tests never see each other's entries. */
  function nextQueue(): string {
    queueNumber += 1;
    return `test-${queueNumber}`;
  }

  function replica(queue: string, options: ReplicaOptions = {}): TestQueue {
    const created = driver.replica(broker.url, queue, options);
    opened.push({ close: () => created.close({ force: true }) });
    return created;
  }

  function worker<I, O, C>(queue: string, options: WorkerOptions<I, O, C>): TestWorker {
    const created = driver.worker(broker.url, queue, options);
    opened.push(created);
    return created;
  }

  /** A worker whose handler holds its batches until released, recording each batch's inputs. */
  function heldWorker(queue: string, options: WorkerOptions<number, number, number> = {}) {
    const batches: number[][] = [];
    let gate = deferred();
    const started: Array<() => void> = [];
    let parked = 0;
    let passed = 0;
    const created = worker<number, number, number>(queue, {
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
    return {
      worker: created,
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

  const depth = (queue: string) => driver.depth(broker.url, queue);

  it("batches two replicas' items together on one worker, with one global batch id", async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const [a, b] = [replica(queue), replica(queue)];
    await Promise.all([held.worker.ready, a.ready, b.ready]);
    const [doubleA, doubleB] = [a.batcher<number, number>('double'), b.batcher<number, number>('double')];
    // The first item occupies the worker's only slot; the next four wait in the broker meanwhile.
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
    await until('the four entries to be queued', async () => (await depth(queue)) === 5);
    held.release();
    await held.nextStart();
    held.release();
    expect(await Promise.all(results)).toEqual([2, 4, 6, 8, 10]);
    expect(held.batches.map((batch) => [...batch].sort((x, y) => x - y))).toEqual([[1], [2, 3, 4, 5]]);
    expect(new Set(ids)).toEqual(new Set([`${held.worker.workerId}-2`]));
    expect(held.worker.stats()).toMatchObject({ batches: 2, items: 5, meanBatchSize: 2.5 });
    // Answered entries leave the queue.
    await until('the queue to be empty', async () => (await depth(queue)) === 0);
  });

  it('streams each item its own values, in order, through the queue', async () => {
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
    const collected: number[] = [];
    const reading = (async () => {
      for await (const value of slow.stream(1)) collected.push(value);
    })();
    await until('the second stream to start', () => collected.length === 1);
    await held.step();
    await until('the second step', () => collected.length === 2);
    await held.step();
    await reading;
    expect(collected).toEqual([1, 2, 3]);
  });

  it('refuses at admission: 503 UNAVAILABLE with no live worker (queueing nothing), 503 QUEUE_FULL past the bound', async () => {
    const queue = nextQueue();
    const a = replica(queue, { maxQueueSize: 2, heartbeatTtlMs: 500 });
    await a.ready;
    const double = a.batcher<number, number>('double');
    await expect(double(1)).rejects.toMatchObject({ code: 'UNAVAILABLE', retryAfterSeconds: 1 });
    expect(await depth(queue)).toBe(0);
    const held = heldWorker(queue);
    await held.worker.ready;
    await until('the replica to see the worker', () => a.isReady());
    const started = held.nextStart();
    const running = double(1);
    await started;
    const queued = double(2);
    await until('two entries', async () => (await depth(queue)) === 2);
    await expect(double(3)).rejects.toMatchObject({ code: 'QUEUE_FULL', retryAfterSeconds: 1 });
    held.release();
    await held.nextStart();
    held.release();
    expect(await Promise.all([running, queued])).toEqual([2, 4]);
    expect(double.stats().rejected).toMatchObject({ UNAVAILABLE: 1, QUEUE_FULL: 1 });
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
    await until('the expired entry to be removed', async () => (await depth(queue)) === 1);
    held.release();
    expect(await running).toBe(2);
    const next = held.nextStart();
    const third = double(3);
    await next;
    held.release();
    expect(await third).toBe(6);
    expect(held.batches).toEqual([[1], [3]]);
    expect(double.stats()).toMatchObject({ expired: 1, succeeded: 2 });
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
    await until('the second entry', async () => (await depth(queue)) === 2);
    controller.abort(new DOMException('The client closed the connection', 'AbortError'));
    await expect(cancelled).rejects.toMatchObject({ name: 'AbortError' });
    await until('the cancelled entry to be removed', async () => (await depth(queue)) === 1);
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

  it('is ready only with a live worker; a worker that stops says so at once', async () => {
    const queue = nextQueue();
    const a = replica(queue, { heartbeatTtlMs: 60_000 });
    await a.ready;
    expect([await a.workersAlive(), await a.isReady()]).toEqual([0, false]);
    const held = heldWorker(queue);
    await held.worker.ready;
    await until('the replica to see the worker', () => a.isReady());
    await held.worker.close();
    // Long before the 60 s heartbeat TTL.
    await until('the replica to see the worker gone', async () => !(await a.isReady()));
    expect(await a.workersAlive()).toBe(0);
  });

  it('never hands a batch that runs longer than claimIdleMs to another worker (its worker reports progress)', async () => {
    const queue = nextQueue();
    const claimIdleMs = 1_000;
    const slow = heldWorker(queue, { claimIdleMs });
    const a = replica(queue);
    await Promise.all([slow.worker.ready, a.ready]);
    const started = slow.nextStart();
    const answer = a.batcher<number, number>('double')(21);
    await started;
    // A second worker, free the whole time: it would get the entry if it were delivered again.
    const taken: number[][] = [];
    const idle = worker<number, number, never>(queue, {
      claimIdleMs,
      handlers: { double: async (inputs) => (taken.push([...inputs]), inputs.map((input) => input * 2)) },
    });
    await idle.ready;
    // Three redelivery periods (a bound on work, not a timing assertion): without progress reports it would move.
    await new Promise((resolve) => setTimeout(resolve, 3 * claimIdleMs));
    slow.release();
    expect(await answer).toBe(42);
    expect([slow.batches, taken]).toEqual([[[21]], []]);
    expect(idle.stats()).toMatchObject({ batches: 0, reclaimed: 0 });
  });

  it('answers every item of a worker SIGKILLed mid-batch through a replacement started within the grace (0 lost)', async () => {
    const queue = nextQueue();
    const statuses: string[] = [];
    const outcomes: string[] = [];
    // The replica sees the worker gone after its heartbeat ttl (3 s); the grace is far longer than a replacement's start.
    const a = replica(queue, {
      workerGraceMs: 60_000,
      onStatus: (status) => statuses.push(`${status.event}:${outcomes.length}`),
    });
    const doomed = await startChildWorker(driver, broker.url, { QUEUE: queue, MODE: 'hang', CLAIM_IDLE_MS: '300' });
    await a.ready;
    await until('the replica to see the worker', () => a.isReady());
    // Its first `workers-up` report too: it can come after `isReady()` holds, and would then be counted as the
    // rescuer's arrival below.
    await until('the replica to report the worker', () => statuses.some((status) => status.startsWith('workers-up')));
    const echo = a.batcher<string, string>('echo');
    const inputs = ['a', 'b', 'c', 'd', 'e'];
    // One group, admitted together: the doomed worker's waiting pull takes what has arrived (all of it on Redis,
    // where one script adds the group; on NATS the group's messages are published one by one) and hangs.
    const answers = echo.callAll(inputs).finally(() => outcomes.push('settled'));
    const doomedBatch = await doomed.batch(0);
    expect(doomedBatch.length).toBeGreaterThan(0);
    expect(inputs).toEqual(expect.arrayContaining(doomedBatch));
    const seen = statuses.length;
    doomed.process.child.kill('SIGKILL');
    await doomed.process.exited;
    // No worker alive: new calls are refused at once, the items already waiting keep waiting through the grace.
    await until('the replica to see the worker gone', () => statuses.slice(seen).includes('workers-down:0'));
    await expect(echo('late')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(outcomes).toEqual([]);
    const rescuer = worker<string, string, never>(queue, {
      claimIdleMs: 300,
      handlers: { echo: async (batch) => batch.map((input) => `rescued:${input}`) },
    });
    expect(await answers).toEqual(inputs.map((input) => `rescued:${input}`));
    // What the doomed worker held was taken over; nothing it held was lost or answered twice.
    expect(rescuer.stats()).toMatchObject({ reclaimed: doomedBatch.length, items: inputs.length });
    expect(echo.stats()).toMatchObject({ inFlightBatches: 0, queueLength: 0, succeeded: 5, failed: 0 });
    // Gone with every item still waiting, back (the rescuer) without any failed: no `workers-gone`.
    expect(statuses.slice(seen)).toEqual(['workers-down:0', 'workers-up:0']);
    await until('the queue to be empty', async () => (await depth(queue)) === 0);
  });

  it('answers the items waiting 503 once the grace ran out with no worker back (not when the worker went)', async () => {
    const queue = nextQueue();
    const statuses: Array<{ event: string; failed?: number; settledBefore: number }> = [];
    let settled = 0;
    const a = replica(queue, {
      workerGraceMs: 300,
      onStatus: (status) =>
        statuses.push({
          event: status.event,
          ...('failed' in status ? { failed: status.failed } : {}),
          settledBefore: settled,
        }),
    });
    const doomed = await startChildWorker(driver, broker.url, { QUEUE: queue, MODE: 'hang', CLAIM_IDLE_MS: '300' });
    await a.ready;
    await until('the replica to see the worker', () => a.isReady());
    const echo = a.batcher<string, string>('echo');
    const outcomes = ['a', 'b'].map((input) =>
      echo(input).then(
        (value) => value,
        (error: unknown) => ((settled += 1), error),
      ),
    );
    // The worker runs the first (and hangs); the second joins its pull or waits in the broker behind it.
    expect(['a', 'b']).toEqual(expect.arrayContaining(await doomed.batch(0)));
    await until('both entries in the broker', async () => (await depth(queue)) === 2);
    doomed.process.child.kill('SIGKILL');
    for (const outcome of await Promise.all(outcomes)) {
      expect(outcome).toMatchObject({
        code: 'UNAVAILABLE',
        retryAfterSeconds: 1,
        message: expect.stringContaining('No worker'),
      });
    }
    // Seen gone with both items still waiting; failed together once the grace ran out, reported once.
    expect(statuses.slice(-2)).toEqual([
      { event: 'workers-down', failed: 0, settledBefore: 0 },
      { event: 'workers-gone', failed: 2, settledBefore: 0 },
    ]);
    await until('their entries to be deleted', async () => (await depth(queue)) === 0);
  });

  it('answers an entry that crashes every worker with a 500 (HANDLER_ERROR) after maxDeliveries deliveries', async () => {
    const queue = nextQueue();
    // Workers are expected back for a minute: the item waits for each replacement instead of failing with 503.
    const a = replica(queue, { heartbeatTtlMs: 60_000 });
    await a.ready;
    const echo = a.batcher<string, string>('echo');
    const env = { QUEUE: queue, MODE: 'poison', CLAIM_IDLE_MS: '200', MAX_DELIVERIES: '2' };
    let poisoned: Promise<unknown> | undefined;
    let crashes = 0;
    let outcome: unknown;
    // Each worker that takes the entry dies; a replacement takes it over, until one gives up on it.
    for (let attempt = 0; attempt < 6 && outcome === undefined; attempt += 1) {
      const child = await startChildWorker(driver, broker.url, env);
      await until('the replica to see the worker', () => a.isReady());
      // Sent once a worker is alive (with none, it would be refused at once).
      poisoned ??= echo('poison').then(
        () => 'answered',
        (error: unknown) => error,
      );
      const settled: 'crashed' | { value: unknown } = await Promise.race([
        child.process.exited.then(() => 'crashed' as const),
        poisoned.then((value) => ({ value })),
      ]);
      if (settled === 'crashed') crashes += 1;
      else {
        outcome = settled.value;
        // Answered and taken out of the queue (acknowledged), not left to be delivered again.
        await until('the poisoned entry to leave the queue', async () => (await depth(queue)) === 0);
        await child.process.stop();
      }
    }
    expect(crashes).toBe(2);
    expect(outcome).toBeInstanceOf(BatchError);
    expect(outcome).toMatchObject({ code: 'HANDLER_ERROR', expose: false });
  });

  it('answers 503 at once while the broker is down, fails the items waiting, and recovers when it returns', async () => {
    const queue = nextQueue();
    const held = heldWorker(queue);
    const statuses: string[] = [];
    const a = replica(queue, { onStatus: (status) => statuses.push(status.event) });
    await Promise.all([held.worker.ready, a.ready]);
    const double = a.batcher<number, number>('double');
    const started = held.nextStart();
    const waiting = double(1).catch((caught: unknown) => caught);
    await started;

    await broker.kill();
    const error = await waiting;
    expect(error).toBeInstanceOf(BatchError);
    expect(error).toMatchObject({ code: 'UNAVAILABLE', retryAfterSeconds: 1 });
    await expect(double(2)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await a.isReady()).toBe(false);

    held.release(); // the worker's answer has nowhere to go; it must not crash the worker
    await broker.restart();
    await until('the replica to see the broker and the worker again', () => a.isReady());
    const recovered = double(21);
    await held.nextStart();
    held.release();
    expect(await recovered).toBe(42);
    // Each change reported once, in order (never once per failed command).
    expect(statuses.filter((event) => event.startsWith('broker'))).toEqual(['broker-up', 'broker-down', 'broker-up']);
  });
});
