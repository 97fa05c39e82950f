// Continuous (iteration-level) scheduling: results equal one-by-one generation token for token, newcomers join a
// running loop, a cancelled request frees its slot, and the pool keeps its guarantees. Nothing here depends on
// how fast the machine is: ordering comes from the worker's messages and the runner's step counters.
import { createBatcher, createStreamingBatcher, isBatchError } from '@microbatch/core';
import type { BatchError } from '@microbatch/core';
import { toHttpError } from '@microbatch/core/http';
import { createWorkerPool } from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationRunnerSpec,
  WorkerPool,
} from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPoolForTesting } from '../src/testing.js';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

/** Greedy for 480 tokens without reaching the end of its story. */
const LONG_RUNNER = 'There was a boy who liked to draw. ';
const LONG_PROMPT =
  'Lily and Tom went to the park to play with the big red ball. They ran and laughed in the warm sun all day. ';

const pools: { close(): Promise<void> }[] = [];
let reference: Pool;

function pool(runner: Partial<TextGenerationRunnerSpec> = {}): Pool {
  const created = createWorkerPool({ runner: { task: 'text-generation', model: TINYSTORIES_DIR, ...runner } });
  pools.push(created);
  return created;
}

/** One request at a time through request-level scheduling (transformers.js `generate()` at batch 1). */
async function oneByOne(inputs: readonly TextGenerationInput[]): Promise<unknown[]> {
  const results: unknown[] = [];
  for (const input of inputs) results.push(...(await reference.run([input])));
  return results;
}

/** Streams one input, calling `onChunk` with each chunk's index; resolves with the concatenated text. */
async function streamText(
  target: Pool,
  input: TextGenerationInput,
  onChunk: (index: number) => void = () => undefined,
): Promise<string> {
  let text = '';
  let index = 0;
  for await (const step of target.stream([input])) {
    const slot = step[0];
    if (typeof slot === 'object' && slot !== null && 'text' in slot) {
      text += slot.text;
      onChunk(index++);
    }
  }
  return text;
}

/** Results without their decode batch (which request-level scheduling does not report), to compare tokens. */
function plain(results: readonly unknown[]): unknown[] {
  return results.map((result) => {
    if (typeof result !== 'object' || result === null || result instanceof Error) return result;
    const { batch: _batch, ...rest } = result as TextGenerationOutput;
    return rest;
  });
}

async function runnerStats(target: Pool): Promise<Readonly<Record<string, number>>> {
  return (await target.runnerStats())[0] ?? {};
}

beforeAll(async () => {
  await ensureWorkerBuilt();
  reference = pool({ scheduling: 'request' });
  await reference.ready;
});

afterAll(async () => {
  await Promise.all(pools.map((created) => created.close()));
});

describe('continuous scheduling', () => {
  it('is the default for text generation and asks the batcher for single requests', async () => {
    const continuous = pool();
    expect(continuous.scheduling).toBe('continuous');
    // The loop's 32 sequences and an eighth more waiting in the worker; the rest wait in the batcher's fair queue.
    expect(continuous.batcherOptions).toEqual({ maxBatchSize: 1, maxConcurrentBatches: 36 });
    expect(reference.scheduling).toBe('request');
    expect(reference.batcherOptions).toMatchObject({ maxConcurrentBatches: 1 });
    await continuous.close();
  });

  it('gives the one-by-one greedy tokens for mixed prompts, max_tokens and staggered arrivals', async () => {
    // A small loop and step budget: requests queue in the worker, long prompts are prefilled in chunks, and
    // rows of very different lengths share steps.
    const continuous = pool({ maxSequences: 3, maxStepTokens: 11 });
    await continuous.ready;
    const inputs: TextGenerationInput[] = [
      { prompt: 'Once upon a time, ', max_new_tokens: 40, temperature: 0 },
      { prompt: 'The cat ', max_new_tokens: 5, temperature: 0 },
      { prompt: LONG_PROMPT, max_new_tokens: 30, temperature: 0 },
      { prompt: 'Hi ', max_new_tokens: 1, temperature: 0 },
      { prompt: 'One day, a little dog named Max ', max_new_tokens: 64, temperature: 0, stop: ['park'] },
      { prompt: 'The sun was shining and the birds ', max_new_tokens: 12, temperature: 0 },
      { prompt: LONG_RUNNER, max_new_tokens: 20, temperature: 0 },
    ];
    const expected = await oneByOne(inputs);
    // Staggered: each request is sent when the one before it has streamed its second chunk (or ended).
    const results: unknown[] = new Array(inputs.length);
    const started: Promise<void>[] = [];
    const send = (index: number): Promise<void> => {
      const input = inputs[index];
      if (input === undefined) return Promise.resolve();
      let next: Promise<void> | undefined;
      const sendNext = () => {
        next ??= send(index + 1);
        started.push(next);
      };
      return streamText(continuous, input, (chunk) => chunk === 1 && sendNext()).then(async () => {
        sendNext();
        results[index] = (await continuous.run([input]))[0];
      });
    };
    await send(0);
    while (started.length > 0) await Promise.all(started.splice(0));
    expect(plain(results)).toEqual(expected);
    const stats = await runnerStats(continuous);
    expect(stats.joinedRunning).toBeGreaterThan(0);
    expect(stats.maxRows).toBeLessThanOrEqual(3);
    // LONG_PROMPT is 30 tokens: prefilled in chunks of 8.
    expect(stats.prefillCalls).toBeGreaterThan(inputs.length * 2);
  });

  it('gives the same results to concurrent batcher calls as one by one, each answered as it ends', async () => {
    const continuous = pool();
    await continuous.ready;
    const generate = createBatcher(continuous.handler, { ...continuous.batcherOptions, batchWaitTimeoutMs: 0 });
    const inputs = ['Once upon a time, ', 'The cat ', LONG_PROMPT, 'Hi '].map((prompt, index) => ({
      prompt,
      max_new_tokens: 4 + index * 20,
      temperature: 0,
    }));
    const order: number[] = [];
    const results = await Promise.all(
      inputs.map((input, index) => generate(input).then((result) => (order.push(index), result))),
    );
    expect(plain(results)).toEqual(await oneByOne(inputs));
    // The shortest generation is answered first, not when the longest one ends.
    expect(order[0]).toBe(0);
    await generate.close();
  });

  it('starts a newcomer while an earlier long generation runs, and answers it first', async () => {
    const continuous = pool();
    await continuous.ready;
    const long = { prompt: LONG_RUNNER, max_new_tokens: 300, temperature: 0 };
    const short = { prompt: 'The cat ', max_new_tokens: 4, temperature: 0 };
    const [alone] = (await continuous.run([long])) as TextGenerationOutput[];
    expect(alone?.usage.completion_tokens).toBe(300);
    const before = await runnerStats(continuous);
    const events: string[] = [];
    let newcomer: Promise<unknown> | undefined;
    const text = await streamText(continuous, long, (chunk) => {
      if (chunk === 0) newcomer = continuous.run([short]).then((result) => (events.push('short done'), result));
    });
    events.push('long done');
    expect(events).toEqual(['short done', 'long done']);
    expect(plain((await newcomer) as unknown[])).toEqual(await oneByOne([short]));
    expect(text).toBe(alone?.text);
    const after = await runnerStats(continuous);
    // The newcomer was merged into a running batch: 300 + 4 tokens in fewer than 300 + 4 decode steps.
    expect((after.joinedRunning ?? 0) - (before.joinedRunning ?? 0)).toBe(1);
    expect((after.decodedRows ?? 0) - (before.decodedRows ?? 0)).toBe(299 + 3);
    expect((after.decodeSteps ?? 0) - (before.decodeSteps ?? 0)).toBe(299);
  });

  it('frees a cancelled request slot at the next step and leaves the others unchanged', async () => {
    const continuous = pool({ maxSequences: 2 });
    await continuous.ready;
    const long = { prompt: LONG_RUNNER, max_new_tokens: 200, temperature: 0 };
    const other = { prompt: 'Once upon a time, ', max_new_tokens: 200, temperature: 0 };
    const short = { prompt: 'The cat ', max_new_tokens: 4, temperature: 0 };
    const abort = new AbortController();
    const events: string[] = [];
    let late: Promise<unknown> | undefined;
    const cancelled = continuous.run([other], { signal: abort.signal }).catch((error: unknown) => error);
    const text = await streamText(continuous, long, (chunk) => {
      if (chunk !== 2) return;
      // Both slots are taken: the short request waits in the worker until the cancelled one leaves.
      late = continuous.run([short]).then((result) => (events.push('short done'), result));
      abort.abort(new Error('client went away'));
    });
    events.push('long done');
    expect(await cancelled).toEqual(new Error('client went away'));
    expect(events).toEqual(['short done', 'long done']);
    expect(plain((await late) as unknown[])).toEqual(await oneByOne([short]));
    expect(text).toBe(((await oneByOne([long]))[0] as TextGenerationOutput).text);
    expect((await runnerStats(continuous)).maxRows).toBe(2);
    expect(continuous.stats()).toMatchObject({ restarts: 0, runningItems: 0 });
  });

  it('decodes rows with different sampling parameters in the same steps', async () => {
    const continuous = pool({ seed: 3 });
    await continuous.ready;
    const greedy = { prompt: 'The cat ', max_new_tokens: 16, temperature: 0 };
    const inputs = [
      greedy,
      { prompt: 'The dog ', max_new_tokens: 16, temperature: 1.3, top_p: 0.9 },
      { prompt: 'The sun ', max_new_tokens: 16, temperature: 0.7 },
      { prompt: 'The car ', max_new_tokens: 16, temperature: 1, top_p: 1e-6 },
    ];
    const results = (await continuous.run(inputs)) as TextGenerationOutput[];
    const stats = await runnerStats(continuous);
    expect(stats.maxRows).toBe(4);
    expect(stats.decodeCalls).toBe(stats.decodeSteps);
    expect(plain(results)[0]).toEqual((await oneByOne([greedy]))[0]);
    // A nucleus that keeps only the top token samples greedily.
    expect(plain(results)[3]).toEqual((await oneByOne([{ ...inputs[3], temperature: 0 } as TextGenerationInput]))[0]);
    for (const result of results) expect(result.usage.completion_tokens).toBeGreaterThan(0);
    // Each request draws from its own seeded stream: the same run on a fresh pool samples the same tokens.
    const again = pool({ seed: 3 });
    expect(plain(await again.run(inputs))).toEqual(plain(results));
  });

  it('streams pieces that add up to the non-streamed result while other requests come and go', async () => {
    const continuous = pool();
    await continuous.ready;
    const streaming = createStreamingBatcher(continuous.streamingHandler, {
      ...continuous.batcherOptions,
      batchWaitTimeoutMs: 0,
    });
    const inputs: TextGenerationInput[] = [
      { prompt: 'Once upon a time, ', max_new_tokens: 200, temperature: 0 },
      { prompt: 'The cat ', max_new_tokens: 7, temperature: 0 },
      { prompt: LONG_PROMPT, max_new_tokens: 60, temperature: 0, stop: ['ball'] },
      { prompt: 'Hi ', max_new_tokens: 30, temperature: 0 },
    ];
    const expected = (await continuous.run(inputs)) as TextGenerationOutput[];
    const streamed = await Promise.all(
      inputs.map(async (input) => {
        let text = '';
        let last: TextGenerationChunk | undefined;
        for await (const chunk of streaming.stream(input)) {
          text += chunk.text;
          last = chunk;
        }
        return { text, finish_reason: last?.finish_reason, usage: last?.usage };
      }),
    );
    expect(streamed).toEqual(plain(expected));
    expect(plain(expected)).toEqual(await oneByOne(inputs));
    await streaming.close();
  });

  it('fails a request beyond the model context with INVALID_INPUT (HTTP 400), alone', async () => {
    const continuous = pool();
    await continuous.ready;
    const generate = createBatcher(continuous.handler, { ...continuous.batcherOptions, batchWaitTimeoutMs: 0 });
    const [tooLong, fine, tooMany] = await Promise.allSettled([
      generate({ prompt: 'word '.repeat(300), max_new_tokens: 4 }),
      generate({ prompt: 'The cat ', max_new_tokens: 4, temperature: 0 }),
      generate({ prompt: 'The cat ', max_new_tokens: 510 }),
    ]);
    const error = (tooLong as PromiseRejectedResult).reason as BatchError;
    expect(isBatchError(error, 'INVALID_INPUT')).toBe(true);
    const message = '`prompt` is 602 tokens; with `max_new_tokens` 4 it exceeds the model context of 512 tokens';
    expect(toHttpError(error)).toMatchObject({ status: 400, body: { error: { code: 'INVALID_INPUT', message } } });
    expect(((tooMany as PromiseRejectedResult).reason as BatchError).details).toEqual({ field: 'max_new_tokens' });
    expect(fine).toMatchObject({ status: 'fulfilled', value: { usage: { completion_tokens: 4 } } });
    await generate.close();
  });

  it('fails every request in the loop with UNAVAILABLE when the worker crashes, then serves the next', async () => {
    const crashing = createWorkerPoolForTesting(
      { runner: { task: 'text-generation', model: TINYSTORIES_DIR } },
      { exitOn: '__exit__' },
    );
    pools.push(crashing);
    await crashing.ready;
    const outcomes = await Promise.allSettled([
      streamText(crashing, { prompt: LONG_RUNNER, max_new_tokens: 300, temperature: 0 }, (chunk) => {
        if (chunk === 0) void crashing.run([{ prompt: '__exit__ ', max_new_tokens: 2 }]).catch(() => undefined);
      }),
    ]);
    expect(isBatchError((outcomes[0] as PromiseRejectedResult).reason, 'UNAVAILABLE')).toBe(true);
    expect(crashing.stats()).toMatchObject({ crashes: 1, restarts: 1 });
    expect(plain(await crashing.run([{ prompt: 'The cat ', max_new_tokens: 4, temperature: 0 }]))).toEqual(
      await oneByOne([{ prompt: 'The cat ', max_new_tokens: 4, temperature: 0 }]),
    );
  });

  it('replaces a worker that cannot stop a timed-out request, failing its other requests with UNAVAILABLE', async () => {
    const hanging = createWorkerPoolForTesting(
      { runner: { task: 'text-generation', model: TINYSTORIES_DIR } },
      { hangOn: '__hang__' },
    );
    pools.push(hanging);
    await hanging.ready;
    const generate = createBatcher(hanging.handler, {
      ...hanging.batcherOptions,
      batchWaitTimeoutMs: 0,
      executionTimeoutMs: 100,
    });
    let hung: Promise<unknown> | undefined;
    const running = streamText(hanging, { prompt: LONG_RUNNER, max_new_tokens: 300, temperature: 0 }, (chunk) => {
      if (chunk === 0) hung = generate({ prompt: '__hang__ ', max_new_tokens: 2 }).catch((error: unknown) => error);
    });
    expect(isBatchError(await running.catch((error: unknown) => error), 'UNAVAILABLE')).toBe(true);
    expect(isBatchError(await hung, 'EXECUTION_TIMEOUT')).toBe(true);
    await expect(hanging.run([{ prompt: 'The cat ', max_new_tokens: 4, temperature: 0 }])).resolves.toHaveLength(1);
    expect(hanging.stats()).toMatchObject({ crashes: 0, restarts: 1 });
    await generate.close();
  });

  it('reports the decode step each request shared with the most others, as an id they all carry', async () => {
    const continuous = pool({ maxSequences: 4 });
    await continuous.ready;
    const activity: { tokens: number; joined: number; left: number }[] = [];
    const off = continuous.onDecodeActivity(({ tokens, joined, left }) => activity.push({ tokens, joined, left }));
    // One run of three prompts: the loop prefills them together, so all three share their first step.
    const inputs: TextGenerationInput[] = [
      { prompt: 'Once upon a time, ', max_new_tokens: 6, temperature: 0 },
      { prompt: 'The cat ', max_new_tokens: 3, temperature: 0 },
      { prompt: 'Hi ', max_new_tokens: 1, temperature: 0 },
    ];
    const results = (await continuous.run(inputs)) as TextGenerationOutput[];
    const ids = results.map((result) => result.batch?.id);
    expect(ids[0]).toMatch(/^w0-[0-9a-f]{4}:1$/);
    expect(results.map((result) => result.batch)).toEqual(inputs.map(() => ({ id: ids[0], size: 3 })));
    // Streamed: the first chunk carries the step so far; a second request that joins later shares the first's
    // steps, so both report 2 rows (the first's most, the second's first step), with the newcomer's step id.
    const first: TextGenerationChunk[] = [];
    const long = (async () => {
      for await (const step of continuous.stream([{ prompt: LONG_RUNNER, max_new_tokens: 400, temperature: 0 }])) {
        const slot = step[0];
        if (typeof slot === 'object' && slot !== null && 'text' in slot) first.push(slot);
      }
    })();
    while (first.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(first[0]?.batch).toEqual({ id: expect.stringMatching(/^w0-[0-9a-f]{4}:\d+$/), size: 1 });
    expect(first.slice(1).every((chunk) => chunk.batch === undefined)).toBe(true);
    const [joined] = (await continuous.run([{ prompt: 'The cat ', max_new_tokens: 2, temperature: 0 }])) as [
      TextGenerationOutput,
    ];
    await long;
    expect(joined.batch?.size).toBe(2);
    // The loop's own reports, each sent before the answers of the steps it covers: every request joined and left
    // once, and every token generated is counted (6 + 3 + 1, 400, 2).
    off();
    const total = activity.reduce(
      (sum, each) => ({
        tokens: sum.tokens + each.tokens,
        joined: sum.joined + each.joined,
        left: sum.left + each.left,
      }),
      { tokens: 0, joined: 0, left: 0 },
    );
    expect(total).toEqual({ tokens: 412, joined: 5, left: 5 });
  });

  it('refuses past its capacity with QUEUE_FULL, counting requests', async () => {
    const continuous = createWorkerPool({
      runner: { task: 'text-generation', model: TINYSTORIES_DIR, maxSequences: 2 },
      maxQueueSize: 3,
    });
    pools.push(continuous);
    // The loop's 2 rows and an eighth more (rounded up).
    expect(continuous.concurrency).toBe(3);
    const input: TextGenerationInput = { prompt: 'The cat ', max_new_tokens: 2, temperature: 0 };
    // Still loading: three single requests wait; a fourth is refused, as is a batch that no longer fits.
    const queued = [continuous.run([input]), continuous.run([input, input])];
    const refused = await continuous.run([input]).then(
      () => expect.unreachable('expected QUEUE_FULL'),
      (error: unknown) => error,
    );
    expect(isBatchError(refused, 'QUEUE_FULL')).toBe(true);
    expect(toHttpError(refused)).toMatchObject({ status: 503, headers: { 'Retry-After': '1' } });
    expect((await Promise.all(queued)).flat()).toHaveLength(3);
  });

  it('validates its scheduling options once, with TypeError', () => {
    const runner = { task: 'text-generation', model: TINYSTORIES_DIR } as const;
    expect(() => createWorkerPool({ runner: { ...runner, scheduling: 'step' as never } })).toThrow(
      new TypeError("Expected `runner.scheduling` to be one of 'continuous', 'request', got `\"step\"` (string)"),
    );
    expect(() => createWorkerPool({ runner: { ...runner, maxSequences: 0 } })).toThrow(
      new TypeError('Expected `runner.maxSequences` to be an integer >= 1, got `0` (number)'),
    );
    // The old name of the loop's rows is refused, naming the new one, rather than ignored.
    expect(() => createWorkerPool({ runner: { ...runner, maxBatchSize: 8 } as never })).toThrow(
      new TypeError(
        '`runner.maxBatchSize` is now `runner.maxSequences` (the rows of a decode step); the batcher keeps ' +
          '`maxBatchSize`, got `runner.maxBatchSize: 8`',
      ),
    );
  });
});
