import { BatchError, type BatcherOptions, createBatcher } from '@microbatch/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_BUCKETS, type Instrumentation, instrumentBatcher } from '@microbatch/prometheus';
import { ManualClock, deferred, flush, samplesOf } from '@microbatch/test-kit';
import { Registry, register } from 'prom-client';

let clock: ManualClock;
let registry: Registry;
const instrumentations: Instrumentation[] = [];

beforeEach(() => {
  clock = new ManualClock();
  registry = new Registry();
});

afterEach(() => {
  for (const instrumentation of instrumentations.splice(0)) instrumentation.unregister();
});

function instrument(...args: Parameters<typeof instrumentBatcher>): Instrumentation {
  const instrumentation = instrumentBatcher(...args);
  instrumentations.push(instrumentation);
  return instrumentation;
}

/** A handler whose calls each stay running until the test releases them, in order; it adds 1 to each input. */
function gated() {
  const gates: Array<ReturnType<typeof deferred<void>>> = [];
  const batches: number[][] = [];
  const handler = async (inputs: number[]) => {
    batches.push([...inputs]);
    const gate = deferred();
    gates.push(gate);
    await gate.promise;
    return inputs.map((x) => x + 1);
  };
  return { gates, batches, handler };
}

const opts = <I>(extra: BatcherOptions<I> = {}): BatcherOptions<I> => ({
  clock,
  name: 'adder',
  batchWaitTimeoutMs: 10,
  ...extra,
});

/** How an item settled: 'fulfilled', the code of a BatchError, or the name and message of another error. */
const outcome = (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    () => 'fulfilled',
    (error: unknown) =>
      error instanceof BatchError ? error.code : `${(error as Error).name}: ${(error as Error).message}`,
  );

describe('instrumentBatcher: one batcher', () => {
  it('counts batches and items and fills the histograms with the exact times and sizes', async () => {
    const model = gated();
    const adder = createBatcher(model.handler, opts({ maxBatchSize: 4 }));
    instrument(adder, { registry });

    // Five calls at t=0: four fill a batch at once (queue wait 0); the fifth waits for the running batch.
    const results = Promise.all([1, 2, 3, 4, 5].map((x) => adder(x)));
    await flush();
    await clock.advance(25);
    let text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_queue_length')).toEqual(['microbatch_queue_length{name="adder"} 1']);
    expect(samplesOf(text, 'microbatch_in_flight_batches')).toEqual(['microbatch_in_flight_batches{name="adder"} 1']);
    expect(samplesOf(text, 'microbatch_batches_total')).toEqual(['microbatch_batches_total{name="adder"} 1']);

    // The first batch ends at t=25 after 25 ms; the fifth item, queued for 25 ms, then runs alone for 5 ms.
    model.gates[0]?.resolve();
    await flush();
    expect(model.batches).toEqual([[1, 2, 3, 4], [5]]);
    await clock.advance(5);
    model.gates[1]?.resolve();
    expect(await results).toEqual([2, 3, 4, 5, 6]);

    text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_batches_total')).toEqual(['microbatch_batches_total{name="adder"} 2']);
    expect(samplesOf(text, 'microbatch_items_total')).toEqual(['microbatch_items_total{name="adder"} 5']);
    expect(samplesOf(text, 'microbatch_queue_length')).toEqual(['microbatch_queue_length{name="adder"} 0']);
    expect(samplesOf(text, 'microbatch_in_flight_batches')).toEqual(['microbatch_in_flight_batches{name="adder"} 0']);
    expect(samplesOf(text, 'microbatch_batch_size')).toEqual([
      'microbatch_batch_size_bucket{le="1",name="adder"} 1',
      'microbatch_batch_size_bucket{le="2",name="adder"} 1',
      'microbatch_batch_size_bucket{le="4",name="adder"} 2',
      'microbatch_batch_size_bucket{le="8",name="adder"} 2',
      'microbatch_batch_size_bucket{le="16",name="adder"} 2',
      'microbatch_batch_size_bucket{le="32",name="adder"} 2',
      'microbatch_batch_size_bucket{le="64",name="adder"} 2',
      'microbatch_batch_size_bucket{le="128",name="adder"} 2',
      'microbatch_batch_size_bucket{le="256",name="adder"} 2',
      'microbatch_batch_size_bucket{le="+Inf",name="adder"} 2',
      'microbatch_batch_size_sum{name="adder"} 5',
      'microbatch_batch_size_count{name="adder"} 2',
    ]);
    // Ray Serve's batch utilisation: 4/4 = 100 % and 1/4 = 25 %.
    expect(samplesOf(text, 'microbatch_batch_utilization_percent')).toEqual([
      'microbatch_batch_utilization_percent_bucket{le="10",name="adder"} 0',
      'microbatch_batch_utilization_percent_bucket{le="20",name="adder"} 0',
      'microbatch_batch_utilization_percent_bucket{le="30",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="40",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="50",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="60",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="70",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="80",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="90",name="adder"} 1',
      'microbatch_batch_utilization_percent_bucket{le="100",name="adder"} 2',
      'microbatch_batch_utilization_percent_bucket{le="+Inf",name="adder"} 2',
      'microbatch_batch_utilization_percent_sum{name="adder"} 125',
      'microbatch_batch_utilization_percent_count{name="adder"} 2',
    ]);
    // One observation per item: 0, 0, 0, 0 and 25 ms.
    expect(samplesOf(text, 'microbatch_queue_wait_ms')).toEqual([
      'microbatch_queue_wait_ms_bucket{le="0.5",name="adder"} 4',
      'microbatch_queue_wait_ms_bucket{le="1",name="adder"} 4',
      'microbatch_queue_wait_ms_bucket{le="2.5",name="adder"} 4',
      'microbatch_queue_wait_ms_bucket{le="5",name="adder"} 4',
      'microbatch_queue_wait_ms_bucket{le="10",name="adder"} 4',
      'microbatch_queue_wait_ms_bucket{le="25",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="50",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="100",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="250",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="500",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="1000",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="2500",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="5000",name="adder"} 5',
      'microbatch_queue_wait_ms_bucket{le="+Inf",name="adder"} 5',
      'microbatch_queue_wait_ms_sum{name="adder"} 25',
      'microbatch_queue_wait_ms_count{name="adder"} 5',
    ]);
    // One observation per batch: 25 and 5 ms.
    expect(samplesOf(text, 'microbatch_batch_execution_ms')).toEqual([
      'microbatch_batch_execution_ms_bucket{le="1",name="adder"} 0',
      'microbatch_batch_execution_ms_bucket{le="2.5",name="adder"} 0',
      'microbatch_batch_execution_ms_bucket{le="5",name="adder"} 1',
      'microbatch_batch_execution_ms_bucket{le="10",name="adder"} 1',
      'microbatch_batch_execution_ms_bucket{le="25",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="50",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="100",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="250",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="500",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="1000",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="2500",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="5000",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="10000",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="30000",name="adder"} 2',
      'microbatch_batch_execution_ms_bucket{le="+Inf",name="adder"} 2',
      'microbatch_batch_execution_ms_sum{name="adder"} 30',
      'microbatch_batch_execution_ms_count{name="adder"} 2',
    ]);
  });

  it('exposes every series at 0 before the first call, so rate() and absence alerts work from the start', async () => {
    instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry },
    );
    const text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_batches_total')).toEqual(['microbatch_batches_total{name="adder"} 0']);
    expect(samplesOf(text, 'microbatch_items_total')).toEqual(['microbatch_items_total{name="adder"} 0']);
    expect(samplesOf(text, 'microbatch_batch_size')).toContain('microbatch_batch_size_count{name="adder"} 0');
    expect(samplesOf(text, 'microbatch_rejections_total')).toEqual(
      [
        'queue_full',
        'overloaded',
        'deadline',
        'cancelled',
        'too_large',
        'error',
        'invalid_input',
        'execution_timeout',
        'bad_handler_result',
        'closed',
        'unavailable',
      ].map((reason) => `microbatch_rejections_total{name="adder",reason="${reason}"} 0`),
    );
  });

  it('counts rejections by reason: too large, cancelled, queue full, deadline, handler error, closed', async () => {
    const adder = createBatcher(
      async (xs: number[]) => {
        if (xs.includes(3)) throw new Error('model crashed');
        return xs;
      },
      opts({ maxQueueSize: 2, batchWaitTimeoutMs: 100, cost: (x: number) => x, maxBatchCost: 10 }),
    );
    instrument(adder, { registry });

    const tooLarge = outcome(adder(11));
    const expires = outcome(adder.call(1, { timeoutMs: 50 }));
    const controller = new AbortController();
    const cancelled = outcome(adder.call(2, { signal: controller.signal }));
    controller.abort();
    const fails = outcome(adder(3));
    const refused = outcome(adder(4)); // 1 and 3 are queued: maxQueueSize reached
    await clock.advance(50);
    await clock.advance(50); // the window closes: [3] runs and throws
    await adder.close();
    const afterClose = outcome(adder(5));

    expect(await Promise.all([tooLarge, expires, cancelled, fails, refused, afterClose])).toEqual([
      'ITEM_TOO_LARGE',
      'DEADLINE_EXCEEDED',
      'AbortError: This operation was aborted',
      'Error: model crashed', // the handler's own error, counted as HANDLER_ERROR
      'QUEUE_FULL',
      'CLOSED',
    ]);
    const text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_rejections_total')).toEqual([
      'microbatch_rejections_total{name="adder",reason="queue_full"} 1',
      'microbatch_rejections_total{name="adder",reason="overloaded"} 0',
      'microbatch_rejections_total{name="adder",reason="deadline"} 1',
      'microbatch_rejections_total{name="adder",reason="cancelled"} 1',
      'microbatch_rejections_total{name="adder",reason="too_large"} 1',
      'microbatch_rejections_total{name="adder",reason="error"} 1',
      'microbatch_rejections_total{name="adder",reason="invalid_input"} 0',
      'microbatch_rejections_total{name="adder",reason="execution_timeout"} 0',
      'microbatch_rejections_total{name="adder",reason="bad_handler_result"} 0',
      'microbatch_rejections_total{name="adder",reason="closed"} 1',
      'microbatch_rejections_total{name="adder",reason="unavailable"} 0',
    ]);
    // Only the item that reached the handler counts as processed.
    expect(samplesOf(text, 'microbatch_items_total')).toEqual(['microbatch_items_total{name="adder"} 1']);
  });

  it('registers into prom-client’s global registry by default', async () => {
    const instrumentation = instrumentBatcher(createBatcher(async (xs: number[]) => xs, opts({ name: 'global' })));
    try {
      expect(instrumentation.name).toBe('global');
      expect(samplesOf(await register.metrics(), 'microbatch_batches_total')).toEqual([
        'microbatch_batches_total{name="global"} 0',
      ]);
    } finally {
      instrumentation.unregister();
    }
    expect(register.getSingleMetric('microbatch_batches_total')).toBeUndefined();
  });

  it('takes a prefix and buckets', async () => {
    const adder = createBatcher(async (xs: number[]) => xs, opts({ maxBatchSize: 2 }));
    instrument(adder, { registry, prefix: 'app_', buckets: { batchSize: [1, 2] } });
    await Promise.all([adder(1), adder(2)]);
    const text = await registry.metrics();
    expect(text).not.toContain('microbatch_');
    expect(samplesOf(text, 'app_batch_size')).toEqual([
      'app_batch_size_bucket{le="1",name="adder"} 0',
      'app_batch_size_bucket{le="2",name="adder"} 1',
      'app_batch_size_bucket{le="+Inf",name="adder"} 1',
      'app_batch_size_sum{name="adder"} 2',
      'app_batch_size_count{name="adder"} 1',
    ]);
    // The buckets not given keep their defaults.
    expect(samplesOf(text, 'app_batch_utilization_percent')).toHaveLength(
      DEFAULT_BUCKETS.utilizationPercent.length + 3,
    );
  });
});

describe('instrumentBatcher: several batchers in one registry', () => {
  it('shares the metrics and labels each batcher’s series with its name', async () => {
    const adder = createBatcher(async (xs: number[]) => xs.map((x) => x + 1), opts({ maxBatchSize: 2 }));
    const doubler = createBatcher(
      async (xs: number[]) => xs.map((x) => x * 2),
      opts({ name: 'doubler', maxBatchSize: 3 }),
    );
    instrument(adder, { registry });
    instrument(doubler, { registry });
    await Promise.all([adder(1), adder(2), doubler(1), doubler(2), doubler(3)]);
    const alone = doubler(4);
    await clock.advance(10);
    expect(await alone).toBe(8);

    const text = await registry.metrics();
    expect(text.match(/^# TYPE microbatch_batches_total counter$/gm)).toHaveLength(1);
    expect(samplesOf(text, 'microbatch_batches_total')).toEqual([
      'microbatch_batches_total{name="adder"} 1',
      'microbatch_batches_total{name="doubler"} 2',
    ]);
    expect(samplesOf(text, 'microbatch_items_total')).toEqual([
      'microbatch_items_total{name="adder"} 2',
      'microbatch_items_total{name="doubler"} 4',
    ]);
    expect(samplesOf(text, 'microbatch_batch_utilization_percent').filter((line) => line.includes('_sum'))).toEqual([
      'microbatch_batch_utilization_percent_sum{name="adder"} 100',
      // 3/3 and 1/3
      `microbatch_batch_utilization_percent_sum{name="doubler"} ${100 + 100 / 3}`,
    ]);
  });

  it('refuses a second batcher with the same name in the same registry and prefix', () => {
    instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry },
    );
    expect(() =>
      instrumentBatcher(
        createBatcher(async (xs: number[]) => xs, opts()),
        { registry },
      ),
    ).toThrow(
      new TypeError(
        'Expected each batcher instrumented into one registry to have its own `name`, got a second batcher named "adder" (prefix "microbatch_")',
      ),
    );
    // Another registry, or another prefix, is another set of series.
    instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry: new Registry() },
    );
    instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry, prefix: 'other_' },
    );
  });

  it('refuses buckets that differ from those already registered under the prefix', () => {
    instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry },
    );
    expect(() =>
      instrumentBatcher(
        createBatcher(async (xs: number[]) => xs, opts({ name: 'b' })),
        { registry, buckets: { batchSize: [1, 8] } },
      ),
    ).toThrow(
      new TypeError(
        'Expected `buckets.batchSize` to match the buckets already registered with prefix "microbatch_" ([1, 2, 4, 8, 16, 32, 64, 128, 256]), got [1, 8]; use another `prefix` or registry for other buckets',
      ),
    );
  });

  it('refuses a prefix whose names are taken by metrics it did not create', () => {
    registry.registerMetric(
      // A look-alike counter of the application's own.
      new (class {
        name = 'microbatch_items_total';
        get = async () => ({ name: this.name, help: 'x', type: 'counter', values: [], aggregator: 'sum' });
        reset = () => undefined;
      })() as never,
    );
    expect(() =>
      instrumentBatcher(
        createBatcher(async (xs: number[]) => xs, opts()),
        { registry },
      ),
    ).toThrow(
      'The registry already has a metric named "microbatch_items_total" that @microbatch/prometheus did not create; pass another `prefix`',
    );
    // Nothing was half-registered.
    expect(registry.getSingleMetric('microbatch_batches_total')).toBeUndefined();
  });
});

describe('instrumentBatcher: unregister', () => {
  it('removes the listeners and series, frees the name, and the last one out unregisters the metrics', async () => {
    const adder = createBatcher(async (xs: number[]) => xs, opts({ maxBatchSize: 1 }));
    const other = createBatcher(async (xs: number[]) => xs, opts({ name: 'other' }));
    const first = instrumentBatcher(adder, { registry });
    instrument(other, { registry });
    await adder(1);
    await registry.metrics(); // a scrape sets the gauges' series, which must go too
    first.unregister();
    let text = await registry.metrics();
    expect(text).not.toContain('name="adder"');
    expect(samplesOf(text, 'microbatch_batches_total')).toEqual(['microbatch_batches_total{name="other"} 0']);

    // The name is free again, and the old listeners no longer count: this batch counts once.
    const again = instrument(adder, { registry });
    await adder(2);
    first.unregister(); // a second call must not touch the new instrumentation
    text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_batches_total')).toEqual([
      'microbatch_batches_total{name="other"} 0',
      'microbatch_batches_total{name="adder"} 1',
    ]);

    again.unregister();
    instrumentations.splice(0).forEach((instrumentation) => instrumentation.unregister());
    expect(registry.getMetricsAsArray()).toEqual([]);
  });

  it('labels a reason this version does not know in lower case, and removes its series too', async () => {
    // A batcher of a newer core, reduced to what instrumentation reads, emitting a reject reason added later.
    const listeners = new Map<string, (payload: unknown) => void>();
    const newer = {
      name: 'newer',
      queueLength: 0,
      inFlightBatches: 0,
      on: (event: string, listener: (payload: unknown) => void) => {
        listeners.set(event, listener);
        return () => listeners.delete(event);
      },
    };
    const instrumentation = instrumentBatcher(newer as never, { registry });
    listeners.get('reject')?.({ reason: 'RATE_LIMITED', error: new Error('slow down') });
    expect(samplesOf(await registry.metrics(), 'microbatch_rejections_total')).toContain(
      'microbatch_rejections_total{name="newer",reason="rate_limited"} 1',
    );
    // A second batcher keeps the metrics registered, so leftover series of the first would show.
    instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry },
    );
    instrumentation.unregister();
    expect(listeners.size).toBe(0);
    expect(await registry.metrics()).not.toContain('name="newer"');
  });

  it('starts afresh after registry.clear()', async () => {
    const cleared = instrument(
      createBatcher(async (xs: number[]) => xs, opts()),
      { registry },
    );
    registry.clear();
    instrument(
      createBatcher(async (xs: number[]) => xs, opts({ name: 'fresh' })),
      { registry },
    );
    expect(samplesOf(await registry.metrics(), 'microbatch_batches_total')).toEqual([
      'microbatch_batches_total{name="fresh"} 0',
    ]);
    // The cleared instrumentation, last of its set, must not unregister the new set's metrics of the same names.
    cleared.unregister();
    expect(samplesOf(await registry.metrics(), 'microbatch_batches_total')).toEqual([
      'microbatch_batches_total{name="fresh"} 0',
    ]);
  });
});

describe('instrumentBatcher: misuse', () => {
  const batcher = () => createBatcher(async (xs: number[]) => xs, opts());

  it.each([
    [{ prefix: 1 }, 'Expected `prefix` to be a string, got `1` (number)'],
    [
      { prefix: 'my-app_' },
      'Expected `prefix` to be a metric name prefix matching [a-zA-Z_:][a-zA-Z0-9_:]*, got `"my-app_"` (string)',
    ],
    [{ registry: {} }, 'Expected `registry` to be a prom-client Registry, got `[object Object]` (object)'],
    [{ buckets: [1, 2] }, 'Expected `buckets` to be an object, got `[1,2]` (array)'],
    [
      { buckets: { executionMs: [10, 5] } },
      'Expected `buckets.executionMs` to be a non-empty, strictly increasing array of finite numbers, got `[10,5]` (array)',
    ],
    [
      { buckets: { queueWaitMs: [] } },
      'Expected `buckets.queueWaitMs` to be a non-empty, strictly increasing array of finite numbers, got `[]` (array)',
    ],
  ])('throws a TypeError for %o', (options, message) => {
    expect(() => instrumentBatcher(batcher(), { registry, ...(options as object) })).toThrow(new TypeError(message));
    expect(registry.getMetricsAsArray()).toEqual([]);
  });

  it('throws a TypeError for something that is not a batcher', () => {
    expect(() => instrumentBatcher({} as never, { registry })).toThrow(
      new TypeError('Expected `batcher` to be a batcher from `createBatcher`, got `[object Object]` (object)'),
    );
  });
});
