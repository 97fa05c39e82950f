import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { BatchError } from '@microbatch/core';
import { createBatcher, isBatchError } from '@microbatch/core';
import { createWorkerPool } from '@microbatch/inference';
import type { OnnxInput, OnnxOutput, WorkerPool } from '@microbatch/inference';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPoolForTesting } from '../src/testing.js';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { buildTestModels } from './helpers/tiny-models.js';
import type { TestModels } from './helpers/tiny-models.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

let models: TestModels;
const pools: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  await ensureWorkerBuilt();
  models = await buildTestModels();
});

afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

afterAll(async () => {
  if (models !== undefined) await rm(models.root, { recursive: true, force: true });
});

const OK: OnnxInput = { input_ids: [1, 2, 3] };
// The test hooks match on the JSON of the batch, so a marker can ride in an ordinary input value.
const marked = (marker: string): OnnxInput => ({ input_ids: [1], marker }) as unknown as OnnxInput;

function testPool(
  hooks: Parameters<typeof createWorkerPoolForTesting>[1],
  size = 1,
): WorkerPool<OnnxInput, OnnxOutput> {
  const pool = createWorkerPoolForTesting({ runner: { task: 'onnx', model: models.embedderOnnx }, size }, hooks);
  pools.push(pool);
  return pool;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('expected a rejection'),
    (error: unknown) => error,
  );
}

describe('worker pool', () => {
  it('fails the in-flight batch with UNAVAILABLE when its worker exits, replaces it, and serves the next batch', async () => {
    const pool = testPool({ exitOn: '__exit__' });
    await pool.ready;
    const error = await rejection(pool.run([OK, marked('__exit__')]));
    expect(isBatchError(error, 'UNAVAILABLE')).toBe(true);
    expect((error as BatchError).message).toBe(
      'Inference worker 0 crashed (exited with code 70) while running a batch of 2; it is being replaced',
    );
    expect(pool.stats()).toMatchObject({ crashes: 1, restarts: 1 });
    const [next] = (await pool.run([OK])) as OnnxOutput[];
    expect(next?.embeddings?.dims).toEqual([4]);
    expect(pool.isReady).toBe(true);
  });

  it('fails every item of a batcher batch with UNAVAILABLE on an uncaught exception in the worker', async () => {
    const pool = testPool({ throwOn: '__throw__' });
    await pool.ready;
    const embed = createBatcher(pool.handler, { batchWaitTimeoutMs: 20, maxConcurrentBatches: pool.size });
    const settled = await Promise.allSettled([embed(OK), embed(marked('__throw__'))]);
    for (const outcome of settled) {
      expect(outcome.status).toBe('rejected');
      const reason = (outcome as PromiseRejectedResult).reason as BatchError;
      expect(reason.code).toBe('UNAVAILABLE');
      expect(reason.message).toMatch(
        /^Inference worker 0 crashed \(threw Error: test hook: uncaught exception for __throw__\)/,
      );
    }
    await expect(embed(OK)).resolves.toMatchObject({ embeddings: { dims: [4] } });
    await embed.close();
  });

  it('terminates and replaces a worker whose batch passes executionTimeoutMs', async () => {
    const pool = testPool({ hangOn: '__hang__' });
    await pool.ready;
    const embed = createBatcher(pool.handler, {
      executionTimeoutMs: 200,
      maxConcurrentBatches: pool.size,
      batchWaitTimeoutMs: 0,
    });
    const error = await rejection(embed(marked('__hang__')));
    expect(isBatchError(error, 'EXECUTION_TIMEOUT')).toBe(true);
    // The hung worker is gone (a busy loop would otherwise hold it forever) and a fresh one serves the next call
    // (straight through the pool: the replacement's start must not count against the batcher's 200 ms).
    await expect(pool.run([OK])).resolves.toMatchObject([{ embeddings: { dims: [4] } }]);
    expect(pool.stats()).toMatchObject({ crashes: 0, restarts: 1, busyWorkers: 0 });
    await embed.close();
  });

  it('rejects a run with its abort reason, whether queued or running', async () => {
    const pool = testPool({ hangOn: '__hang__' });
    await pool.ready;
    const running = new AbortController();
    const queued = new AbortController();
    const first = rejection(pool.run([marked('__hang__')], { signal: running.signal }));
    const second = rejection(pool.run([OK], { signal: queued.signal }));
    expect(pool.stats()).toMatchObject({ busyWorkers: 1, queueLength: 1 });
    queued.abort(new Error('queued abort'));
    running.abort(new Error('running abort'));
    expect(await first).toEqual(new Error('running abort'));
    expect(await second).toEqual(new Error('queued abort'));
    expect(pool.stats()).toMatchObject({ restarts: 1, queueLength: 0 });
    await expect(pool.run([OK])).resolves.toHaveLength(1);
  });

  it('rejects ready quickly, naming the model path, when the model cannot load', async () => {
    const missing = join(models.root, 'no-such-model');
    const pool = createWorkerPool({ runner: { task: 'text-generation', model: missing } });
    pools.push(pool);
    // Quickly: the message is the load failure's own, not the start timeout's (30 s by default).
    const error = await rejection(pool.ready);
    expect(isBatchError(error, 'UNAVAILABLE')).toBe(true);
    expect((error as Error).message).toBe(
      `Failed to load the text-generation model from "${missing}": missing config.json, tokenizer.json (expected a transformers.js model folder)`,
    );
    expect(pool.isReady).toBe(false);
    await expect(pool.run([{ prompt: 'Hi ' }])).rejects.toBe(error);
  });

  it('rejects ready when the execution provider is not available', async () => {
    const pool = createWorkerPool({ runner: { task: 'onnx', model: models.embedderOnnx }, executionProvider: 'cuda' });
    pools.push(pool);
    await expect(pool.ready).rejects.toThrow(`Failed to load the onnx model from "${models.embedderOnnx}"`);
  });

  it('runs size batches at once on separate workers', async () => {
    const pool = testPool({}, 2);
    await pool.ready;
    expect(pool.stats()).toMatchObject({ size: 2, readyWorkers: 2 });
    const both = Promise.all([pool.run([OK]), pool.run([OK])]);
    expect(pool.stats()).toMatchObject({ busyWorkers: 2, queueLength: 0 });
    await both;
  });

  it('close() rejects queued and running batches with CLOSED and refuses new ones', async () => {
    const pool = testPool({ hangOn: '__hang__' });
    await pool.ready;
    const outcomes = Promise.allSettled([pool.run([marked('__hang__')]), pool.run([OK])]);
    await pool.close();
    for (const outcome of [...(await outcomes), ...(await Promise.allSettled([pool.run([OK])]))]) {
      expect(isBatchError((outcome as PromiseRejectedResult).reason, 'CLOSED')).toBe(true);
    }
    expect(pool.closed).toBe(true);
    expect(pool.isReady).toBe(false);
  });

  it('refuses past its capacity with QUEUE_FULL (503, Retry-After) instead of queueing without bound', async () => {
    const pool = createWorkerPoolForTesting(
      { runner: { task: 'onnx', model: models.embedderOnnx }, size: 2, maxQueueSize: 2 },
      {},
    );
    pools.push(pool);
    expect(pool.concurrency).toBe(2);
    // Still loading: nothing runs, so the queue fills: as much as the workers take at once, then refusals.
    const queued = [pool.run([OK]), pool.run([OK])];
    const refused = await rejection(pool.run([OK]));
    expect(isBatchError(refused, 'QUEUE_FULL')).toBe(true);
    expect((refused as BatchError).retryAfterSeconds).toBe(1);
    expect((refused as BatchError).message).toBe(
      'Worker pool "inference" is full: 2 batches already wait for its workers (maxQueueSize 2); ' +
        'feed it through a batcher with `pool.batcherOptions`',
    );
    expect(pool.stats().queueLength).toBe(2);
    await Promise.all([...queued, pool.ready]);
    // Ready: two batches run, two wait, the fifth is refused; each settles once.
    const outcomes = Array.from({ length: 5 }, () =>
      pool.run([OK]).then(
        () => 'ok',
        (error: unknown) => error,
      ),
    );
    expect(pool.stats()).toMatchObject({ busyWorkers: 2, queueLength: 2 });
    const settled = await Promise.all(outcomes);
    expect(settled.slice(0, 4)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(isBatchError(settled[4], 'QUEUE_FULL')).toBe(true);
    // Through a batcher with its options, a flood waits in the batcher (admission, fairness), never refused here.
    const batcher = createBatcher(pool.handler, { ...pool.batcherOptions, maxBatchSize: 2 });
    const results = await Promise.all(Array.from({ length: 40 }, () => batcher(OK)));
    expect(results).toHaveLength(40);
    await batcher.close();
  });

  it('refuses streaming on a runner that does not stream', () => {
    const pool = testPool({});
    expect(() => pool.stream([OK])).toThrow(new TypeError('The onnx runner does not stream; use `run()` / `handler`'));
  });

  it('validates its options once, with TypeError', () => {
    const runner = { task: 'text-generation', model: TINYSTORIES_DIR } as const;
    expect(() => createWorkerPool({ runner, size: 0 })).toThrow(
      new TypeError('Expected `size` to be an integer >= 1, got `0` (number)'),
    );
    expect(() => createWorkerPool({ runner, threads: 1.5 })).toThrow(
      new TypeError('Expected `threads` to be an integer >= 1, got `1.5` (number)'),
    );
    expect(() => createWorkerPool({ runner, maxQueueSize: 0 })).toThrow(
      new TypeError('Expected `maxQueueSize` to be an integer >= 1, got `0` (number)'),
    );
    expect(() => createWorkerPool({ runner: { ...runner, topP: 0 } })).toThrow(
      new TypeError('Expected `runner.topP` to be a number > 0 and <= 1, got `0` (number)'),
    );
    expect(() => createWorkerPool({ runner: { task: 'summarize', model: 'x' } as never })).toThrow(
      new TypeError(
        "Expected `runner.task` to be one of 'text-generation', 'feature-extraction', 'text-classification', 'onnx', got `\"summarize\"` (string)",
      ),
    );
  });
});
