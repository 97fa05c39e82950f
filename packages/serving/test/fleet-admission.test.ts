// Admission across web replicas, against a real redis-server and a real nats-server -js (one suite, a driver per
// transport): two replicas (`createRedisQueue` / `createNatsQueue`, each behind its own `ReplicaAdmission`, as
// `createQueuedTextCompletionService` puts it) and one worker whose handler sleeps for a fixed time per batch and
// per item. The latency limit is derived from the batch time measured on the spot, so the figures hold on a slow,
// busy machine; the handler's timers keep them near-deterministic.
import { isBatchError } from '@microbatch/core';
import type { BatchHandler, BatcherBase, CallOptions, FleetLoad } from '@microbatch/core';
import { toHttpError } from '@microbatch/core/http';
import { createNatsQueue, createNatsWorker } from '@microbatch/nats';
import { createRedisQueue, createRedisWorker } from '@microbatch/redis';
import { pollUntil, startNatsServer, startRedisServer, waitFor } from '@microbatch/test-kit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ReplicaAdmission } from '../src/service/replica-admission.js';

/** The worker's handler: this many ms per batch, plus this many per item. */
const BATCH_MS = 30;
const ITEM_MS = 5;
const MAX_BATCH_SIZE = 4;

/** A replica as this suite uses it: what `createRedisQueue` and `createNatsQueue` both return. */
interface FleetQueue {
  readonly ready: Promise<void>;
  batcher<I, O>(
    name: string,
  ): BatcherBase & { call(input: I, options?: CallOptions): Promise<O>; callAll(inputs: I[]): Promise<O[]> };
  workersAlive(): Promise<number>;
  load(): FleetLoad;
  close(options?: { force?: boolean }): Promise<void>;
}

/** One transport: its broker (started by the suite on a free port), its replicas and its workers. */
interface Driver {
  readonly name: string;
  start(): Promise<{ readonly url: string; stop(): Promise<void> }>;
  replica(url: string, queue: string, replicaId: string): FleetQueue;
  worker(
    url: string,
    queue: string,
    handler: BatchHandler<number, number>,
  ): { ready: Promise<void>; close(): Promise<void> };
}

const workerOptions = { log: false, heartbeatMs: 100, maxBatchSize: MAX_BATCH_SIZE } as const;
const drivers: readonly Driver[] = [
  {
    name: 'Redis',
    start: startRedisServer,
    replica: (url, queue, replicaId) => createRedisQueue({ url, queue, replicaId, heartbeatTtlMs: 1_000 }),
    worker: (url, queue, slow) => createRedisWorker({ url, queue, ...workerOptions, handlers: { slow } }),
  },
  {
    name: 'NATS',
    start: startNatsServer,
    replica: (url, queue, replicaId) => createNatsQueue({ url, queue, replicaId, heartbeatTtlMs: 1_000 }),
    worker: (url, queue, slow) => createNatsWorker({ url, queue, ...workerOptions, handlers: { slow } }),
  },
];

let queueNumber = 0;
const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((resource) => resource.close()));
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One worker (the fleet) and two replicas on a fresh queue; `ran` counts how often the worker ran each input. */
async function fleet(driver: Driver, url: string) {
  queueNumber += 1;
  const queue = `fleet-${queueNumber}`;
  const ran = new Map<number, number>();
  const worker = driver.worker(url, queue, async (inputs) => {
    for (const input of inputs) ran.set(input, (ran.get(input) ?? 0) + 1);
    await sleep(BATCH_MS + ITEM_MS * inputs.length);
    return inputs;
  });
  opened.push(worker);
  const replicas = [0, 1].map((index) => {
    const created = driver.replica(url, queue, `${queue}-${index}`);
    opened.push({ close: () => created.close({ force: true }) });
    return created;
  });
  await Promise.all([worker.ready, ...replicas.map((replica) => replica.ready)]);
  await pollUntil(
    () => replicas[0]!.workersAlive(),
    (alive) => alive > 0,
    30_000,
    20,
  );
  // Calibration: full batches one after another, until the worker's fit is trusted and published. What one full
  // batch takes here (timers on this machine, Redis round trips) sets the limit.
  const plain = replicas[0]!.batcher<number, number>('slow');
  const times: number[] = [];
  for (let round = 0; round < 8; round += 1) {
    const started = performance.now();
    await plain.callAll(Array.from({ length: MAX_BATCH_SIZE }, (_, index) => -1 - round * 10 - index));
    times.push(performance.now() - started);
  }
  await waitFor("the worker's fit, as both replicas sample it", () =>
    replicas.every((replica) => (replica.load().workers[0]?.fit?.samples ?? 0) >= 5),
  );
  const batchMs = median(times);
  return { replicas, worker, ran, batchMs };
}

interface Outcome {
  readonly input: number;
  readonly ms: number;
  readonly status: number;
  readonly value?: unknown;
  readonly error?: unknown;
}

/**
 * Sends `rate` requests a second for `durationMs` through `batcher`, each timed from its send to its answer or
 * refusal; resolves once every one settled.
 */
async function openLoop(
  batcher: BatcherBase & { call(input: number, options?: CallOptions): Promise<unknown> },
  first: number,
  rate: number,
  durationMs: number,
  options: CallOptions = {},
): Promise<Outcome[]> {
  const count = Math.round((rate * durationMs) / 1_000);
  const start = performance.now();
  const outcomes: Array<Promise<Outcome>> = [];
  for (let index = 0; index < count; index += 1) {
    const due = start + (index * 1_000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const input = first + index;
    const sent = performance.now();
    outcomes.push(
      batcher.call(input, options).then(
        (value) => ({ input, ms: performance.now() - sent, status: 200, value }),
        (error: unknown) => ({ input, ms: performance.now() - sent, status: toHttpError(error).status, error }),
      ),
    );
  }
  return Promise.all(outcomes);
}

function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

const round = (value: number): number => Math.round(value * 10) / 10;

describe.each(drivers)('admission across replicas ($name)', (driver) => {
  let broker: { readonly url: string; stop(): Promise<void> };
  beforeAll(async () => {
    broker = await driver.start();
  });
  afterAll(() => broker.stop());

  it('two replicas, one saturated worker: refuses at once what the fleet would answer late; accepted p99 <= 1.5x the limit', async () => {
    const { replicas, ran, batchMs } = await fleet(driver, broker.url);
    // Ten full batches' worth: a queue of 40 items fits the limit.
    const limitMs = 10 * batchMs;
    const guarded = replicas.map((replica) =>
      new ReplicaAdmission(limitMs, () => replica.load()).guard(replica.batcher<number, number>('slow')),
    );
    // The worker answers MAX_BATCH_SIZE items per batchMs; each replica sends that much, so twice what it can do.
    const rate = (1_000 * MAX_BATCH_SIZE) / batchMs;
    const durationMs = Math.max(3_000, 25 * batchMs);
    const [a, b] = await Promise.all([
      openLoop(guarded[0]!, 100_000, rate, durationMs),
      openLoop(guarded[1]!, 200_000, rate, durationMs),
    ]);
    const all = [...a, ...b];
    const accepted = all.filter((outcome) => outcome.status === 200);
    const refused = all.filter((outcome) => outcome.status !== 200);
    const figures = {
      batchMs: round(batchMs),
      limitMs: round(limitMs),
      sent: all.length,
      accepted: accepted.length,
      refused: refused.length,
      acceptedP50Ms: round(median(accepted.map((outcome) => outcome.ms))),
      acceptedP99Ms: round(
        quantile(
          accepted.map((outcome) => outcome.ms),
          0.99,
        ),
      ),
      refusalP99Ms: round(
        quantile(
          refused.map((outcome) => outcome.ms),
          0.99,
        ),
      ),
    };
    console.log(`[fleet admission, saturated, ${driver.name}] ${JSON.stringify(figures)}`);
    // Saturated: about half of what was sent is more than the worker can do, and was refused.
    expect(refused.length).toBeGreaterThan(all.length / 4);
    expect(accepted.length).toBeGreaterThan(all.length / 4);
    for (const outcome of refused) {
      expect(isBatchError(outcome.error) && outcome.error.code).toBe('OVERLOADED');
      expect(outcome.status).toBe(503);
      expect(toHttpError(outcome.error).headers['Retry-After']).toMatch(/^[1-9]\d*$/);
    }
    // Refused at once: never queued, so never run (the worker ran exactly the accepted inputs, each once).
    for (const outcome of accepted) expect(outcome.value).toBe(outcome.input);
    const served = [...ran.keys()].filter((input) => input >= 0).sort((x, y) => x - y);
    expect(served).toEqual(accepted.map((outcome) => outcome.input).sort((x, y) => x - y));
    expect([...ran.values()].every((times) => times === 1)).toBe(true);
    expect(figures.acceptedP99Ms).toBeLessThanOrEqual(1.5 * limitMs);
  });

  it('a heavy client on replica A does not crowd out a light one on replica B', async () => {
    const { replicas, batchMs } = await fleet(driver, broker.url);
    const limitMs = 10 * batchMs;
    const guarded = replicas.map((replica) =>
      new ReplicaAdmission(limitMs, () => replica.load()).guard(replica.batcher<number, number>('slow')),
    );
    const capacity = (1_000 * MAX_BATCH_SIZE) / batchMs; // items a second
    const durationMs = Math.max(4_000, 30 * batchMs);
    // Replica B sees the heavy client's requests in flight on replica A (published with A's samples).
    let heavySeenOnB = 0;
    const watch = setInterval(() => {
      heavySeenOnB = Math.max(heavySeenOnB, replicas[1]!.load().keys.get('heavy') ?? 0);
    }, 10);
    // The heavy client alone sends three times what the worker can do; the light one a tenth of it.
    const [heavy, light] = await Promise.all([
      openLoop(guarded[0]!, 100_000, 3 * capacity, durationMs, { fairnessKey: 'heavy' }),
      openLoop(guarded[1]!, 200_000, Math.max(10_000 / durationMs, capacity / 10), durationMs, {
        fairnessKey: 'light',
      }),
    ]);
    clearInterval(watch);
    const answered = (outcomes: readonly Outcome[]) => outcomes.filter((outcome) => outcome.status === 200);
    const figures = {
      batchMs: round(batchMs),
      limitMs: round(limitMs),
      heavySent: heavy.length,
      heavyAnswered: answered(heavy).length,
      lightSent: light.length,
      lightAnswered: answered(light).length,
      lightP90Ms: round(
        quantile(
          light.map((outcome) => outcome.ms),
          0.9,
        ),
      ),
      heavyAcceptedP90Ms: round(
        quantile(
          answered(heavy).map((outcome) => outcome.ms),
          0.9,
        ),
      ),
      heavySeenOnB,
    };
    console.log(`[fleet admission, fairness, ${driver.name}] ${JSON.stringify(figures)}`);
    // The heavy client was refused much of what it sent (the fleet was saturated by it).
    expect(answered(heavy).length).toBeLessThan(heavy.length * 0.75);
    expect(heavySeenOnB).toBeGreaterThan(0);
    expect(light.length).toBeGreaterThanOrEqual(10);
    expect(answered(light).length).toBeGreaterThanOrEqual(0.9 * light.length);
    expect(figures.lightP90Ms).toBeLessThanOrEqual(limitMs);
  });
});
