// Continuous scheduling in the metrics: the decode loop's rows per step are the batch sizes, and the batchers in
// front of it, which hand it one request at a time, claim none.
import { createBatcher } from '@microbatch/core';
import { samplesOf } from '@microbatch/test-kit';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { type DecodeLoopActivity, instrumentBatcher, instrumentDecodeLoop } from '../src/index.js';

function fakeLoop(name: string) {
  const listeners = new Set<(activity: DecodeLoopActivity) => void>();
  return {
    name,
    onDecodeActivity(listener: (activity: DecodeLoopActivity) => void) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    report(activity: DecodeLoopActivity) {
      for (const listener of listeners) listener(activity);
    },
  };
}

describe('instrumentDecodeLoop', () => {
  it('records every step’s rows in microbatch_decode_rows, and tokens, joins and leaves as counters', async () => {
    const registry = new Registry();
    const loop = fakeLoop('inference');
    const metrics = instrumentDecodeLoop(loop, { registry });
    // 2 steps of 1 row, 1 of 3, 1 of 9.
    loop.report({ stepsByRows: [0, 2, 0, 1], tokens: 5, joined: 3, left: 1 });
    loop.report({ stepsByRows: [0, 0, 0, 0, 0, 0, 0, 0, 0, 1], tokens: 9, joined: 6, left: 8 });
    const text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_decode_rows')).toEqual([
      'microbatch_decode_rows_bucket{le="1",name="inference"} 2',
      'microbatch_decode_rows_bucket{le="2",name="inference"} 2',
      'microbatch_decode_rows_bucket{le="4",name="inference"} 3',
      'microbatch_decode_rows_bucket{le="8",name="inference"} 3',
      'microbatch_decode_rows_bucket{le="16",name="inference"} 4',
      'microbatch_decode_rows_bucket{le="32",name="inference"} 4',
      'microbatch_decode_rows_bucket{le="64",name="inference"} 4',
      'microbatch_decode_rows_bucket{le="128",name="inference"} 4',
      'microbatch_decode_rows_bucket{le="256",name="inference"} 4',
      'microbatch_decode_rows_bucket{le="+Inf",name="inference"} 4',
      'microbatch_decode_rows_sum{name="inference"} 14',
      'microbatch_decode_rows_count{name="inference"} 4',
    ]);
    expect(samplesOf(text, 'microbatch_decode_tokens_total')).toEqual([
      'microbatch_decode_tokens_total{name="inference"} 14',
    ]);
    expect(samplesOf(text, 'microbatch_decode_joined_total')).toEqual([
      'microbatch_decode_joined_total{name="inference"} 9',
    ]);
    expect(samplesOf(text, 'microbatch_decode_left_total')).toEqual([
      'microbatch_decode_left_total{name="inference"} 9',
    ]);
    expect(() => instrumentDecodeLoop(fakeLoop('inference'), { registry })).toThrow(TypeError);
    metrics.unregister();
    loop.report({ stepsByRows: [0, 1], tokens: 1, joined: 0, left: 0 });
    expect(registry.getSingleMetric('microbatch_decode_rows')).toBeUndefined();
  });

  it('counts the prefix cache’s lookups, hits, reused tokens and evictions, and sums its bytes over the workers', async () => {
    const registry = new Registry();
    const loop = fakeLoop('inference');
    const metrics = instrumentDecodeLoop(loop, { registry });
    const window = { stepsByRows: [0, 1], tokens: 1, joined: 1, left: 0 };
    const zero = await registry.metrics();
    expect(samplesOf(zero, 'microbatch_prefix_cache_bytes')).toEqual([
      'microbatch_prefix_cache_bytes{name="inference"} 0',
    ]);
    loop.report({ ...window, worker: 0, prefixCacheLookups: 3, prefixCacheHits: 2, prefixCacheTokens: 48 });
    loop.report({ ...window, worker: 0, prefixCacheEvictions: 0, prefixCacheBytes: 4000 });
    loop.report({ ...window, worker: 1, prefixCacheLookups: 1, prefixCacheEvictions: 5, prefixCacheBytes: 1000 });
    // Worker 0's cache shrank (evictions and finished sequences): its latest level replaces its earlier one.
    loop.report({ ...window, worker: 0, prefixCacheHits: 1, prefixCacheTokens: 16, prefixCacheBytes: 3000 });
    const text = await registry.metrics();
    const series = ['lookups_total', 'hits_total', 'tokens_total', 'evictions_total', 'bytes'].flatMap((metric) =>
      samplesOf(text, `microbatch_prefix_cache_${metric}`),
    );
    expect(series).toEqual([
      'microbatch_prefix_cache_lookups_total{name="inference"} 4',
      'microbatch_prefix_cache_hits_total{name="inference"} 3',
      'microbatch_prefix_cache_tokens_total{name="inference"} 64',
      'microbatch_prefix_cache_evictions_total{name="inference"} 5',
      'microbatch_prefix_cache_bytes{name="inference"} 4000',
    ]);
    metrics.unregister();
    expect(registry.getSingleMetric('microbatch_prefix_cache_hits_total')).toBeUndefined();
    expect(registry.getSingleMetric('microbatch_prefix_cache_bytes')).toBeUndefined();
  });

  it('leaves out the batch sizes of a batcher instrumented with batchSizes: false, keeping its other series', async () => {
    const registry = new Registry();
    const feeding = createBatcher(async (inputs: number[]) => inputs, { name: 'generate', maxBatchSize: 1 });
    const plain = createBatcher(async (inputs: number[]) => inputs, { name: 'plain' });
    instrumentBatcher(feeding, { registry, batchSizes: false });
    instrumentBatcher(plain, { registry });
    await Promise.all([feeding(1), feeding(2), plain(3), plain(4)]);
    const text = await registry.metrics();
    expect(samplesOf(text, 'microbatch_batch_size').some((line) => line.includes('name="generate"'))).toBe(false);
    expect(samplesOf(text, 'microbatch_batch_size')).toContain('microbatch_batch_size_count{name="plain"} 1');
    expect(samplesOf(text, 'microbatch_batches_total')).toContain('microbatch_batches_total{name="generate"} 2');
    expect(() => instrumentBatcher(plain, { registry: new Registry(), batchSizes: 'no' as never })).toThrow(
      new TypeError('Expected `batchSizes` to be a boolean, got `"no"` (string)'),
    );
  });
});
