import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BatchError, createBatcher, type BatcherOptions } from '../src/index.js';
import { ManualClock, deferred, flush, settleOf } from '@microbatch/test-kit';

let clock: ManualClock;
let unhandled: unknown[];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeEach(() => {
  clock = new ManualClock();
  unhandled = [];
  process.on('unhandledRejection', onUnhandled);
});

afterEach(async () => {
  await flush();
  process.off('unhandledRejection', onUnhandled);
  expect(unhandled).toEqual([]);
});

/** A handler that records the batches it sees and multiplies each input by 10. */
function recorder() {
  const batches: number[][] = [];
  const handler = async (inputs: number[]) => {
    batches.push([...inputs]);
    return inputs.map((x) => x * 10);
  };
  return { batches, handler };
}

/** A handler whose every call stays running until the test releases it. */
function gated<I>() {
  const batches: I[][] = [];
  const gates: Array<ReturnType<typeof deferred<void>>> = [];
  const signals: AbortSignal[] = [];
  const handler = async (inputs: I[], { signal }: { signal: AbortSignal }) => {
    batches.push([...inputs]);
    signals.push(signal);
    const gate = deferred();
    gates.push(gate);
    await gate.promise;
    return inputs.map((x) => `r:${String(x)}`);
  };
  return { batches, gates, signals, handler };
}

const opts = <I>(extra: BatcherOptions<I> = {}): BatcherOptions<I> => ({ clock, batchWaitTimeoutMs: 10, ...extra });

describe('dispatch', () => {
  it('dispatches a full batch at once and the rest when the wait has passed', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 4, batchWaitTimeoutMs: 100 }));
    const results = [1, 2, 3, 4, 5].map((x) => batcher(x));
    await flush();
    expect(batches).toEqual([[1, 2, 3, 4]]);
    await clock.advance(99);
    expect(batches).toEqual([[1, 2, 3, 4]]);
    await clock.advance(1);
    expect(batches).toEqual([[1, 2, 3, 4], [5]]);
    expect(await Promise.all(results)).toEqual([10, 20, 30, 40, 50]);
  });

  it('measures the wait from the first item of the batch, not the last', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts({ batchWaitTimeoutMs: 5 }));
    void batcher(1);
    await clock.advance(3);
    void batcher(2);
    await clock.advance(1);
    expect(batches).toEqual([]);
    await clock.advance(1);
    expect(batches).toEqual([[1, 2]]);
  });

  it('is work-conserving by default, and calls made together still share a batch', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler);
    expect(batcher.batchWaitTimeoutMs).toBe(0);
    expect(batcher.maxBatchSize).toBe(8);
    expect(await Promise.all([batcher(1), batcher(2), batcher(3)])).toEqual([10, 20, 30]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('gathers items that arrive while the handler is busy into the next batch', async () => {
    const { batches, gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 4, batchWaitTimeoutMs: 1 }));
    const first = batcher(1);
    await clock.advance(1);
    expect(batches).toEqual([[1]]);
    const rest = [2, 3, 4, 5, 6, 7].map((x) => batcher(x));
    await clock.advance(50);
    expect(batches).toEqual([[1]]);
    gates[0]?.resolve();
    await flush();
    expect(batches).toEqual([[1], [2, 3, 4, 5]]);
    gates[1]?.resolve();
    await flush();
    expect(batches).toEqual([[1], [2, 3, 4, 5], [6, 7]]);
    gates[2]?.resolve();
    expect(await Promise.all([first, ...rest])).toEqual(['r:1', 'r:2', 'r:3', 'r:4', 'r:5', 'r:6', 'r:7']);
  });

  it('starts the next batch before the callers of the last one resume', async () => {
    const order: string[] = [];
    const batcher = createBatcher(
      async (inputs: number[]) => {
        order.push(`handler ${inputs.join()}`);
        return inputs;
      },
      opts({ maxBatchSize: 1 }),
    );
    const calls = [1, 2].map((x) => batcher(x).then(() => order.push(`caller ${x}`)));
    await Promise.all(calls);
    // The model must not sit idle while the previous batch's responses are written.
    expect(order).toEqual(['handler 1', 'handler 2', 'caller 1', 'caller 2']);
  });

  it('runs up to maxConcurrentBatches handler calls at once', async () => {
    const { batches, gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 2, maxConcurrentBatches: 2 }));
    const all = [1, 2, 3, 4, 5, 6].map((x) => batcher(x));
    await flush();
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(batcher.inFlightBatches).toBe(2);
    expect(batcher.queueLength).toBe(2);
    gates[1]?.resolve();
    await flush();
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    gates[0]?.resolve();
    gates[2]?.resolve();
    expect(await Promise.all(all)).toHaveLength(6);
  });
});

describe('bounded queue', () => {
  it('refuses a call at once with QUEUE_FULL when maxQueueSize items wait', async () => {
    const { batches, gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxQueueSize: 2, maxBatchSize: 1 }));
    const running = batcher(1);
    await flush();
    const queued = [batcher(2), batcher(3)];
    const refused = settleOf(batcher(4));
    await Promise.resolve();
    expect(refused.state).toBe('rejected');
    expect(refused.error).toBeInstanceOf(BatchError);
    expect(refused.error).toMatchObject({
      code: 'QUEUE_FULL',
      message: 'Batcher "default" queue is full (maxQueueSize = 2)',
      retryAfterSeconds: 1,
    });
    for (const gate of [0, 1, 2]) {
      await flush();
      gates[gate]?.resolve();
    }
    expect(await Promise.all([running, ...queued])).toEqual(['r:1', 'r:2', 'r:3']);
    expect(batches).toEqual([[1], [2], [3]]);
    expect(batcher.stats().rejected.QUEUE_FULL).toBe(1);
  });
});

describe('deadlines', () => {
  it('removes an item whose deadline passes while queued; the handler never sees it', async () => {
    const { batches, gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 4, timeoutMs: 50 }));
    const first = settleOf(batcher(1));
    await clock.advance(10);
    const late = settleOf(batcher(2));
    const early = settleOf(batcher.call(3, { timeoutMs: 20 }));
    const capped = settleOf(batcher.call(4, { timeoutMs: 1000 }));
    await clock.advance(20);
    expect(early.state).toBe('rejected');
    expect(early.error).toMatchObject({
      code: 'DEADLINE_EXCEEDED',
      message: 'Deadline of 20 ms exceeded while queued',
    });
    expect(late.state).toBe('pending');
    await clock.advance(30);
    expect(late.error).toMatchObject({ code: 'DEADLINE_EXCEEDED', message: 'Deadline of 50 ms exceeded while queued' });
    expect(capped.error).toMatchObject({
      code: 'DEADLINE_EXCEEDED',
      message: 'Deadline of 50 ms exceeded while queued',
    });
    // The batcher's deadline also bounds the running item: its result, once ready, is discarded.
    expect(first.error).toMatchObject({
      code: 'DEADLINE_EXCEEDED',
      message: 'Deadline of 50 ms exceeded while running',
    });
    gates[0]?.resolve();
    await flush();
    expect(batches).toEqual([[1]]);
    expect(batcher.queueLength).toBe(0);
    expect(batcher.stats().expired).toBe(4);
  });

  it('rejects a running item at its deadline and discards its result', async () => {
    const { gates, signals, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 2 }));
    const fast = settleOf(batcher.call(1, { timeoutMs: 30 }));
    const slow = batcher(2);
    await flush();
    await clock.advance(30);
    expect(fast.error).toMatchObject({
      code: 'DEADLINE_EXCEEDED',
      message: 'Deadline of 30 ms exceeded while running',
    });
    expect(signals[0]?.aborted).toBe(false);
    gates[0]?.resolve();
    expect(await slow).toBe('r:2');
    expect(fast.state).toBe('rejected');
  });
});

describe('cancellation', () => {
  it('rejects at once with signal.reason when the signal is already aborted', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts());
    const reason = new Error('gone');
    await expect(batcher.call(1, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await clock.advance(100);
    expect(batches).toEqual([]);
  });

  it('removes an item aborted while queued, and removes its listener', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 4 }));
    const controller = new AbortController();
    const remove = vi.spyOn(controller.signal, 'removeEventListener');
    const kept = batcher(1);
    const aborted = settleOf(batcher.call(2, { signal: controller.signal }));
    controller.abort();
    await flush();
    expect(aborted.state).toBe('rejected');
    expect((aborted.error as Error).name).toBe('AbortError');
    expect(batcher.queueLength).toBe(1);
    await clock.advance(10);
    expect(batches).toEqual([[1]]);
    expect(await kept).toBe(10);
    expect(remove).toHaveBeenCalledWith('abort', expect.any(Function));
    expect(batcher.stats().cancelled).toBe(1);
  });

  it('rejects an item aborted while running with signal.reason; the others still get results', async () => {
    const { gates, signals, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 3 }));
    const controllers = [new AbortController(), new AbortController(), new AbortController()];
    const calls = [1, 2, 3].map((x, i) => settleOf(batcher.call(x, { signal: controllers[i]?.signal })));
    await flush();
    controllers[0]?.abort('first');
    await flush();
    expect(calls[0]).toMatchObject({ state: 'rejected', error: 'first' });
    expect(signals[0]?.aborted).toBe(false);
    gates[0]?.resolve();
    await flush();
    expect(calls.map((c) => c.state)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect(calls[1]?.value).toBe('r:2');
  });

  it("aborts the handler's signal once every item of its batch is aborted", async () => {
    const { gates, signals, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 2 }));
    const controllers = [new AbortController(), new AbortController()];
    const calls = [1, 2].map((x, i) => settleOf(batcher.call(x, { signal: controllers[i]?.signal })));
    await flush();
    controllers[0]?.abort('a');
    expect(signals[0]?.aborted).toBe(false);
    controllers[1]?.abort('b');
    expect(signals[0]?.aborted).toBe(true);
    expect(signals[0]?.reason).toBe('b');
    gates[0]?.resolve();
    await flush();
    expect(calls.map((c) => c.error)).toEqual(['a', 'b']);
  });
});

describe('partitioning with batchKey', () => {
  it('fills batches per key and never mixes keys', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(
      handler,
      opts({ maxBatchSize: 2, maxConcurrentBatches: 4, batchKey: (x: number) => x % 2 }),
    );
    const all = [1, 2, 3, 4, 5, 6].map((x) => batcher(x));
    await flush();
    expect(batches).toEqual([
      [1, 3],
      [2, 4],
    ]);
    await clock.advance(10);
    expect(batches).toEqual([[1, 3], [2, 4], [5], [6]]);
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40, 50, 60]);
  });

  it('lets no key starve: the ready key with the oldest item goes first', async () => {
    const { batches, gates, handler } = gated<string>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 4, batchKey: (x: string) => x[0] }));
    const first = batcher('A0');
    await clock.advance(10);
    const b = batcher('B1');
    await clock.advance(1);
    const as = ['A1', 'A2', 'A3', 'A4', 'A5'].map((x) => batcher(x));
    await clock.advance(20);
    for (let i = 0; i < 3; i += 1) {
      gates[i]?.resolve();
      await flush();
    }
    expect(batches).toEqual([['A0'], ['B1'], ['A1', 'A2', 'A3', 'A4'], ['A5']]);
    gates[3]?.resolve();
    await Promise.all([first, b, ...as]);
  });

  it('rejects only the call whose batchKey throws', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(
      handler,
      opts({
        batchKey: (x: number) => {
          if (x === 2) throw new Error('no key');
          return 'k';
        },
      }),
    );
    const good = batcher(1);
    const bad = settleOf(batcher(2));
    await clock.advance(10);
    expect(await good).toBe(10);
    expect(bad.error).toMatchObject({
      code: 'INVALID_INPUT',
      message: '`batchKey` failed for this input',
      expose: false,
    });
    expect(batches).toEqual([[1]]);
  });
});

describe('cost-based batches', () => {
  it('never exceeds maxBatchCost and dispatches when the cost is reached', async () => {
    const batches: string[][] = [];
    const batcher = createBatcher(
      async (inputs: string[]) => {
        batches.push([...inputs]);
        return inputs.map((s) => s.length);
      },
      opts({ maxBatchSize: 100, maxBatchCost: 10, cost: (s: string) => s.length }),
    );
    const all = ['aaaa', 'bbbb', 'cc', 'dd', 'eeeeeeeee'].map((s) => batcher(s));
    await flush();
    // ['dd'] cannot grow: the next item would take it past maxBatchCost, so it does not wait.
    expect(batches).toEqual([['aaaa', 'bbbb', 'cc'], ['dd']]);
    await clock.advance(9);
    expect(batches).toHaveLength(2);
    await clock.advance(1);
    expect(batches).toEqual([['aaaa', 'bbbb', 'cc'], ['dd'], ['eeeeeeeee']]);
    expect(await Promise.all(all)).toEqual([4, 4, 2, 2, 9]);
  });

  it('rejects an item larger than maxBatchCost with ITEM_TOO_LARGE, and a throwing cost only for that call', async () => {
    const { handler } = recorder();
    const batcher = createBatcher(
      handler,
      opts({
        maxBatchCost: 10,
        cost: (x: number) => {
          if (x < 0) throw new BatchError('INVALID_INPUT', 'negative');
          return x;
        },
      }),
    );
    await expect(batcher(11)).rejects.toMatchObject({
      code: 'ITEM_TOO_LARGE',
      message: 'Item cost 11 exceeds maxBatchCost 10',
    });
    await expect(batcher(-1)).rejects.toMatchObject({ code: 'INVALID_INPUT', message: 'negative' });
    const ok = batcher(3);
    await clock.advance(10);
    expect(await ok).toBe(30);
  });

  it('treats a cost function returning a non-number as a programming error', async () => {
    const { handler } = recorder();
    const batcher = createBatcher(handler, opts({ cost: () => Number.NaN }));
    await expect(batcher(1)).rejects.toThrow(
      new TypeError('Expected `cost` to return a finite number >= 0, got `NaN` (number)'),
    );
  });
});

describe('priority', () => {
  it('runs higher priority first within a key, FIFO among equals', async () => {
    const { batches, gates, handler } = gated<string>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 8 }));
    const first = batcher('first');
    await clock.advance(10);
    const calls = [
      batcher.call('a0', { priority: 0 }),
      batcher.call('b1', { priority: 1 }),
      batcher.call('c0', { priority: 0 }),
      batcher.call('d2', { priority: 2 }),
      batcher.call('e1', { priority: 1 }),
    ];
    await clock.advance(10);
    gates[0]?.resolve();
    await flush();
    expect(batches).toEqual([['first'], ['d2', 'b1', 'e1', 'a0', 'c0']]);
    gates[1]?.resolve();
    expect(await Promise.all(calls)).toEqual(['r:a0', 'r:b1', 'r:c0', 'r:d2', 'r:e1']);
    await first;
  });
});

describe('handler results', () => {
  it('rejects only the item whose result is an Error', async () => {
    const batcher = createBatcher(
      async (inputs: number[]) => inputs.map((x) => (x === 2 ? new RangeError('two') : x)),
      opts(),
    );
    const calls = [1, 2, 3].map((x) => settleOf(batcher(x)));
    await clock.advance(10);
    expect(calls.map((c) => c.state)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(calls[1]?.error).toEqual(new RangeError('two'));
  });

  it('rejects every item of the batch with the error the handler threw', async () => {
    const boom = new Error('boom');
    const batcher = createBatcher(async (_inputs: number[]): Promise<number[]> => {
      throw boom;
    }, opts());
    const calls = [1, 2].map((x) => settleOf(batcher(x)));
    await clock.advance(10);
    expect(calls.map((c) => c.error)).toEqual([boom, boom]);
    expect(batcher.stats()).toMatchObject({
      failed: 2,
      succeeded: 0,
      rejected: expect.objectContaining({ HANDLER_ERROR: 2 }),
    });
  });

  it('rejects every item with BAD_HANDLER_RESULT when the result has the wrong length or type', async () => {
    const short = createBatcher(async (inputs: number[]) => inputs.slice(1), opts());
    const calls = [1, 2, 3].map((x) => settleOf(short(x)));
    await clock.advance(10);
    for (const call of calls) {
      expect(call.error).toMatchObject({
        code: 'BAD_HANDLER_RESULT',
        message: 'Expected the batch handler to return an array of 3 results (one per input), got an array of 2',
      });
    }
    const nothing = createBatcher(
      (async () => undefined) as unknown as (inputs: number[]) => Promise<number[]>,
      opts(),
    );
    const call = settleOf(nothing(1));
    await clock.advance(10);
    expect((call.error as Error).message).toBe(
      'Expected the batch handler to return an array of 1 results (one per input), got `undefined` (undefined)',
    );
  });

  it('accepts a synchronous handler and a synchronous throw', async () => {
    const sync = createBatcher((inputs: number[]) => inputs.map((x) => x + 1), opts());
    const thrower = createBatcher((_inputs: number[]): number[] => {
      throw new Error('sync');
    }, opts());
    const a = sync(1);
    const b = settleOf(thrower(1));
    await clock.advance(10);
    expect(await a).toBe(2);
    expect((b.error as Error).message).toBe('sync');
  });

  it("with onBatchError 'isolate', re-runs a failing batch by halves so only the poison item fails", async () => {
    const batches: string[][] = [];
    const batcher = createBatcher(
      async (inputs: string[]) => {
        batches.push([...inputs]);
        if (inputs.includes('poison')) throw new Error('poisoned');
        return inputs.map((s) => s.toUpperCase());
      },
      opts({ maxBatchSize: 4, onBatchError: 'isolate' }),
    );
    const calls = ['a', 'poison', 'c', 'd'].map((s) => settleOf(batcher(s)));
    await flush();
    expect(batches).toEqual([['a', 'poison', 'c', 'd'], ['a', 'poison'], ['a'], ['poison'], ['c', 'd']]);
    expect(calls.map((c) => c.value ?? (c.error as Error).message)).toEqual(['A', 'poisoned', 'C', 'D']);
    expect(batcher.stats().batchesProcessed).toBe(1);
  });

  it('fails a batch that runs past executionTimeoutMs and frees its slot', async () => {
    const signals: AbortSignal[] = [];
    let calls = 0;
    const batcher = createBatcher(
      (inputs: number[], { signal }) => {
        signals.push(signal);
        calls += 1;
        return calls === 1 ? new Promise<number[]>(() => {}) : inputs;
      },
      opts({ maxBatchSize: 1, executionTimeoutMs: 100 }),
    );
    const stuck = settleOf(batcher(1));
    const next = batcher(2);
    await clock.advance(99);
    expect(stuck.state).toBe('pending');
    await clock.advance(1);
    expect(stuck.error).toMatchObject({
      code: 'EXECUTION_TIMEOUT',
      message: 'Batch 1 ran longer than executionTimeoutMs (100 ms)',
    });
    expect(signals[0]?.aborted).toBe(true);
    expect(await next).toBe(2);
  });
});

describe('streaming', () => {
  it('gives each caller its own values, ending each at its END marker', async () => {
    const { END, SKIP } = await import('../src/index.js');
    const batcher = createBatcher(
      async function* (prompts: string[]) {
        yield prompts.map((p) => `${p}1`);
        yield prompts.map((p, i) => (i === 0 ? END : `${p}2`));
        yield prompts.map((p, i) => (i === 0 ? SKIP : `${p}3`));
      },
      opts({ maxBatchSize: 2 }),
    );
    expect(batcher.streaming).toBe(true);
    const collect = async (iterable: AsyncIterable<string>) => {
      const out: string[] = [];
      for await (const value of iterable) out.push(value);
      return out;
    };
    const [a, b] = await Promise.all([collect(batcher.stream('a')), collect(batcher.stream('b'))]);
    expect(a).toEqual(['a1']);
    expect(b).toEqual(['b1', 'b2', 'b3']);
    expect(await Promise.all([batcher('x'), batcher('y')])).toEqual([['x1'], ['y1', 'y2', 'y3']]);
  });

  it('cancels a caller that stops iterating without disturbing the others', async () => {
    const steps = [deferred<void>(), deferred<void>(), deferred<void>()];
    let finalized = false;
    let handlerSignal: AbortSignal | undefined;
    const batcher = createBatcher(
      async function* (prompts: string[], { signal }) {
        handlerSignal = signal;
        try {
          for (const step of steps) {
            await step.promise;
            yield prompts.map((p) => p);
          }
        } finally {
          finalized = true;
        }
      },
      opts({ maxBatchSize: 2 }),
    );
    const quitter = batcher.stream('q');
    const stayer = batcher.stream('s');
    await flush();
    steps[0]?.resolve();
    expect(await quitter.next()).toEqual({ value: 'q', done: false });
    expect(await stayer.next()).toEqual({ value: 's', done: false });
    await quitter.return?.();
    steps[1]?.resolve();
    expect(await stayer.next()).toEqual({ value: 's', done: false });
    expect(await quitter.next()).toEqual({ value: undefined, done: true });
    expect(handlerSignal?.aborted).toBe(false);
    await stayer.return?.();
    expect(handlerSignal?.aborted).toBe(true);
    steps[2]?.resolve();
    await flush();
    expect(finalized).toBe(true);
    expect(batcher.stats().cancelled).toBe(2);
  });

  it('fails only the stream whose slot is an Error, and every stream on a malformed step', async () => {
    const batcher = createBatcher(
      async function* (prompts: string[]) {
        yield prompts.map((p) => (p === 'bad' ? new Error('bad prompt') : p));
        yield prompts.map((p) => p);
        yield ['only-one'];
      },
      opts({ maxBatchSize: 2 }),
    );
    const bad = settleOf(batcher('bad'));
    const good = settleOf(batcher('good'));
    await flush();
    expect((bad.error as Error).message).toBe('bad prompt');
    expect(good.error).toMatchObject({
      code: 'BAD_HANDLER_RESULT',
      message:
        'Expected the batch handler to return steps, each an array of 2 slots (one per input), got an array of 1',
    });
  });
});

describe('runtime tuning', () => {
  it('applies new maxBatchSize, batchWaitTimeoutMs and maxConcurrentBatches from the next batch', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 2 }));
    void batcher(1);
    void batcher(2);
    await flush();
    batcher.maxBatchSize = 3;
    batcher.batchWaitTimeoutMs = 50;
    batcher.maxConcurrentBatches = 2;
    [3, 4, 5, 6].forEach((x) => void batcher(x));
    await flush();
    expect(batches).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    await clock.advance(49);
    expect(batches).toHaveLength(2);
    await clock.advance(1);
    expect(batches).toEqual([[1, 2], [3, 4, 5], [6]]);
    expect(() => {
      batcher.maxBatchSize = 0;
    }).toThrow(new TypeError('Expected `maxBatchSize` to be an integer >= 1, got `0` (number)'));
  });
});

describe('lifecycle', () => {
  it('close() refuses new calls with CLOSED, runs what is queued at once, and resolves when drained', async () => {
    const { batches, gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 2, batchWaitTimeoutMs: 1000 }));
    const calls = [1, 2, 3].map((x) => settleOf(batcher(x)));
    await flush();
    let drained = false;
    const closing = batcher.close().then(() => {
      drained = true;
    });
    expect(batcher.closed).toBe(true);
    await expect(batcher(9)).rejects.toMatchObject({
      code: 'CLOSED',
      message: 'Batcher "default" is closed',
      retryAfterSeconds: 1,
    });
    gates[0]?.resolve();
    await flush();
    expect(batches).toEqual([[1, 2], [3]]);
    expect(drained).toBe(false);
    gates[1]?.resolve();
    await closing;
    expect(calls.map((c) => c.value)).toEqual(['r:1', 'r:2', 'r:3']);
  });

  it('close({ force: true }) rejects what is queued and lets running batches finish', async () => {
    const { gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 1 }));
    const running = batcher(1);
    await flush();
    const queued = settleOf(batcher(2));
    const closing = batcher.close({ force: true });
    await flush();
    expect(queued.error).toMatchObject({ code: 'CLOSED' });
    gates[0]?.resolve();
    await closing;
    expect(await running).toBe('r:1');
  });
});

describe('observability', () => {
  it('emits batch events and keeps Ray-style stats', async () => {
    const { gates, handler } = gated<number>();
    const batcher = createBatcher(handler, opts({ name: 'adder', maxBatchSize: 4 }));
    const events: unknown[] = [];
    batcher.on('batchStart', (e) => events.push({ start: e }));
    batcher.on('batchEnd', (e) => events.push({ end: e }));
    const off = batcher.on('reject', (e) => events.push({ reject: e.reason }));
    const calls = [batcher(1), batcher(2)];
    await clock.advance(10);
    await clock.advance(15);
    gates[0]?.resolve();
    await Promise.all(calls);
    await expect(batcher(5, { signal: AbortSignal.abort('x') })).rejects.toBe('x');
    off();
    await expect(batcher(6, { signal: AbortSignal.abort('y') })).rejects.toBe('y');
    expect(events).toEqual([
      { start: { batchId: 1, batchSize: 2, maxBatchSize: 4, key: undefined, queueTimesMs: [10, 10] } },
      { end: { batchId: 1, batchSize: 2, key: undefined, executionMs: 15, failed: 0 } },
      { reject: 'CANCELLED' },
    ]);
    expect(batcher.stats()).toMatchObject({
      name: 'adder',
      queueLength: 0,
      inFlightBatches: 0,
      batchesProcessed: 1,
      itemsProcessed: 2,
      lastBatchSize: 2,
      meanBatchSize: 2,
      batchUtilizationPercent: 50,
      queueWaitMs: { count: 2, sum: 20, mean: 10, max: 10 },
      executionMs: { count: 1, sum: 15, mean: 15, max: 15 },
      succeeded: 2,
      failed: 0,
      cancelled: 2,
      expired: 0,
    });
  });

  it('reports the dispatch facts to onDispatch before the handler runs', async () => {
    const seen: string[] = [];
    const batcher = createBatcher(async (inputs: number[]) => {
      seen.push('handler');
      return inputs;
    }, opts());
    const p = batcher.call(1, { onDispatch: (info) => seen.push(JSON.stringify(info)) });
    await clock.advance(10);
    await p;
    expect(seen).toEqual(['{"batchId":1,"batchSize":1,"queueTimeMs":10}', 'handler']);
  });
});

describe('misuse', () => {
  const handler = async (inputs: number[]) => inputs;
  it.each([
    [{ maxBatchSize: 0 }, 'Expected `maxBatchSize` to be an integer >= 1, got `0` (number)'],
    [{ maxBatchSize: 1.5 }, 'Expected `maxBatchSize` to be an integer >= 1, got `1.5` (number)'],
    [{ batchWaitTimeoutMs: -1 }, 'Expected `batchWaitTimeoutMs` to be a finite number >= 0, got `-1` (number)'],
    [{ batchWaitTimeoutMs: '5' }, 'Expected `batchWaitTimeoutMs` to be a finite number >= 0, got `"5"` (string)'],
    [{ maxConcurrentBatches: 0 }, 'Expected `maxConcurrentBatches` to be an integer >= 1, got `0` (number)'],
    [
      { maxQueueSize: Number.POSITIVE_INFINITY },
      'Expected `maxQueueSize` to be an integer >= 1, got `Infinity` (number)',
    ],
    [{ timeoutMs: 0 }, 'Expected `timeoutMs` to be a number > 0, got `0` (number)'],
    [{ executionTimeoutMs: Number.NaN }, 'Expected `executionTimeoutMs` to be a number > 0, got `NaN` (number)'],
    [{ maxBatchCost: -3 }, 'Expected `maxBatchCost` to be a number > 0, got `-3` (number)'],
    [{ batchKey: 'id' }, 'Expected `batchKey` to be a function, got `"id"` (string)'],
    [{ cost: 1 }, 'Expected `cost` to be a function, got `1` (number)'],
    [
      { onBatchError: 'retry' },
      "Expected `onBatchError` to be one of 'fail-batch', 'isolate', got `\"retry\"` (string)",
    ],
    [{ name: '' }, 'Expected `name` to be a non-empty string, got `""` (string)'],
    [
      { clock: {} },
      'Expected `clock` to be an object with `now`, `setTimeout` and `clearTimeout` functions, got `[object Object]` (object)',
    ],
  ])('createBatcher(handler, %j) throws a precise TypeError', (options, message) => {
    expect(() => createBatcher(handler, options as BatcherOptions<number>)).toThrow(new TypeError(message));
  });

  it('rejects a handler that is not a function and bad call options', async () => {
    expect(() => createBatcher(42 as never)).toThrow(
      new TypeError('Expected `handler` to be a function, got `42` (number)'),
    );
    const batcher = createBatcher(handler, opts());
    await expect(batcher.call(1, { timeoutMs: -5 })).rejects.toThrow(
      new TypeError('Expected `timeoutMs` to be a number > 0, got `-5` (number)'),
    );
    await expect(batcher.call(1, { priority: Number.NaN })).rejects.toThrow(TypeError);
  });
});

describe('edge cases', () => {
  it('keeps the process alive while an item waits: a script can await a batcher directly', async () => {
    const { execFileSync } = await import('node:child_process');
    const source = new URL('../src/index.ts', import.meta.url).pathname;
    const script = `import { createBatcher } from ${JSON.stringify(source)};
      const double = createBatcher(async (xs) => xs.map((x) => x * 2));
      console.log(await double(21));`;
    const tsx = new URL('../../../node_modules/.bin/tsx', import.meta.url).pathname;
    expect(execFileSync(tsx, ['--input-type=module', '-e', script], { encoding: 'utf8' }).trim()).toBe('42');
  });

  it('never sends the handler an item whose onDispatch threw', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts({ maxBatchSize: 2 }));
    const bad = settleOf(
      batcher.call(1, {
        onDispatch: () => {
          throw new Error('header write failed');
        },
      }),
    );
    const good = batcher(2);
    await flush();
    expect(batches).toEqual([[2]]);
    expect(await good).toBe(20);
    expect((bad.error as Error).message).toBe('header write failed');
  });

  it('restarts the wait window when the item that opened it is cancelled', async () => {
    const { batches, handler } = recorder();
    const batcher = createBatcher(handler, opts({ batchWaitTimeoutMs: 100 }));
    const controller = new AbortController();
    const opener = settleOf(batcher.call(1, { signal: controller.signal }));
    await clock.advance(90);
    void batcher(2);
    controller.abort();
    await clock.advance(10);
    expect(batches).toEqual([]);
    await clock.advance(89);
    expect(batches).toEqual([]);
    await clock.advance(1);
    expect(batches).toEqual([[2]]);
    expect(opener.state).toBe('rejected');
  });
});
