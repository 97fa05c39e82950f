// What latency-aware admission adds to the metrics and to readiness: the estimate and the predicted latency as
// gauges, OVERLOADED refusals by cause, and /readyz not-ready while new work would be refused.
import { createBatcher } from '@microbatch/core';
import { ManualClock, flush, samplesOf } from '@microbatch/test-kit';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createHealth, instrumentBatcher } from '../src/index.js';

/** A batcher whose batch of n items takes 10 + 2n ms of `clock`, warmed up so its estimate is ready. */
async function warmBatcher(clock: ManualClock, maxLatencyMs: number) {
  const batcher = createBatcher(
    (inputs: number[]) =>
      new Promise<number[]>((resolve) => clock.setTimeout(() => resolve(inputs), 10 + 2 * inputs.length)),
    { clock, name: 'adder', maxBatchSize: 4, maxLatencyMs },
  );
  for (const size of [1, 2, 3, 4, 1]) {
    const results = Array.from({ length: size }, (_, i) => batcher(i));
    await flush();
    await clock.advance(10 + 2 * size);
    await Promise.all(results);
  }
  return batcher;
}

describe('admission metrics', () => {
  it('exposes the estimate, the predicted latency and OVERLOADED refusals by cause', async () => {
    const clock = new ManualClock();
    const registry = new Registry();
    const batcher = await warmBatcher(clock, 60);
    const instrumentation = instrumentBatcher(batcher, { registry });
    const calls = Array.from({ length: 14 }, () => batcher(1).catch((error: unknown) => error));
    await flush();
    const text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_overload_refusals_total')).toEqual([
      'microbatch_overload_refusals_total{name="adder",cause="latency"} 2',
      'microbatch_overload_refusals_total{name="adder",cause="deadline"} 0',
      'microbatch_overload_refusals_total{name="adder",cause="fair_share"} 0',
    ]);
    expect(samplesOf(text, 'microbatch_rejections_total')).toContain(
      'microbatch_rejections_total{name="adder",reason="overloaded"} 2',
    );
    const gauge = (metric: string) => Number(samplesOf(text, metric)[0]?.split(' ')[1]);
    expect(gauge('microbatch_latency_estimate_ms_per_cost')).toBeCloseTo(2, 9);
    expect(gauge('microbatch_latency_estimate_ms_per_batch')).toBeCloseTo(10, 9);
    // 4 running (18 ms) + 8 queued: 18 + 10·3 + 2·9 = 66 ms for the next item.
    expect(samplesOf(text, 'microbatch_predicted_latency_ms')).toEqual([
      'microbatch_predicted_latency_ms{name="adder"} 66',
    ]);
    await clock.advance(100);
    await Promise.all(calls);
    instrumentation.unregister();
  });
});

describe('readiness under overload', () => {
  it('reports not ready while a new item would be refused, and ready again once the backlog drained', async () => {
    const clock = new ManualClock();
    const batcher = await warmBatcher(clock, 60);
    const health = createHealth({ batchers: [batcher] });
    expect(await health.readiness()).toEqual({ status: 200, body: { status: 'ok' } });
    const calls = Array.from({ length: 12 }, () => batcher(1));
    await flush();
    expect(await health.readiness()).toEqual({
      status: 503,
      body: {
        status: 'unavailable',
        reasons: ['batcher "adder" is overloaded: predicted latency 66 ms exceeds maxLatencyMs 60 ms'],
      },
    });
    await clock.advance(60);
    await Promise.all(calls);
    expect(await health.readiness()).toEqual({ status: 200, body: { status: 'ok' } });
  });
  it("in mode 'fleet', stays ready under overload (the 503s refuse the work) and goes unready only once closed", async () => {
    const clock = new ManualClock();
    const batcher = await warmBatcher(clock, 60);
    const fleet = createHealth({ batchers: [batcher], mode: 'fleet' });
    const instance = createHealth({ batchers: [batcher] });
    const calls = Array.from({ length: 12 }, () => batcher(1));
    await flush();
    expect((await instance.readiness()).status).toBe(503);
    expect(await fleet.readiness()).toEqual({ status: 200, body: { status: 'ok' } });
    await expect(batcher(1)).rejects.toMatchObject({ code: 'OVERLOADED' });
    const closing = batcher.close();
    expect(await fleet.readiness()).toEqual({
      status: 503,
      body: { status: 'unavailable', reasons: ['batcher "adder" is closed'] },
    });
    await clock.advance(60);
    await Promise.all([...calls, closing]);
    expect(() => createHealth({ mode: 'cluster' as never })).toThrow(
      "Expected `mode` to be 'instance' or 'fleet', got",
    );
  });
});
