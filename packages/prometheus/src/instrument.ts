import type { BatcherBase } from '@microbatch/core';
import { MetricSet } from './metric-set.js';
import { fail, isObjectLike } from '@microbatch/core/util';
import { type InstrumentOptions, resolveOptions } from './options.js';

/** What {@link instrumentBatcher} returns. */
export interface Instrumentation {
  /** The `name` label of the batcher's series. */
  readonly name: string;
  /**
   * Stops recording: removes the batcher's listeners and its series, and frees its name in the registry. The last
   * batcher of a registry to go also unregisters the metrics. Calling it again does nothing.
   */
  unregister(): void;
}

/**
 * Records a batcher's Ray Serve-style metrics in a prom-client registry, labelled `name` = `batcher.name`:
 * histograms of queue wait (ms), execution time (ms), batch size and batch utilisation (% of `maxBatchSize`; not
 * recorded with `batchSizes: false`, for a batcher that feeds a continuous decode loop one request at a time),
 * gauges of queue length and in-flight batches, and counters of batches, items and rejections by `reason`; for
 * latency-aware admission, gauges of the predicted latency and of the estimate (`ms_per_cost`, `ms_per_batch`) and
 * a counter of `OVERLOADED` refusals by `cause` (latency, deadline, fair_share).
 * Several batchers may share one registry if their names differ.
 *
 * @example
 * ```ts
 * import { Registry } from 'prom-client';
 *
 * const registry = new Registry();
 * const metrics = instrumentBatcher(createBatcher(handler, { name: 'adder' }), { registry });
 * await registry.metrics(); // ...microbatch_batches_total{name="adder"} 0...
 * metrics.unregister();
 * ```
 */
export function instrumentBatcher(batcher: BatcherBase, options: InstrumentOptions = {}): Instrumentation {
  const ok = isObjectLike(batcher) && typeof batcher.on === 'function' && typeof batcher.name === 'string';
  if (!ok) fail('batcher', 'a batcher from `createBatcher`', batcher);
  const { registry, prefix, buckets, batchSizes } = resolveOptions(options);

  const set = MetricSet.for(registry, prefix, buckets);
  // Read once: the label must stay the same series for the life of the instrumentation.
  const { name } = batcher;
  set.add(batcher, batchSizes);
  const unsubscribe = [
    batcher.on('batchStart', (payload) => set.batchStart(name, payload)),
    batcher.on('batchEnd', (payload) => set.batchEnd(name, payload)),
    batcher.on('reject', (payload) => set.reject(name, payload)),
  ];
  let active = true;
  return {
    name,
    unregister: () => {
      // Idempotent: a second call must not delete the series of a new batcher that has taken the same name since.
      if (!active) return;
      active = false;
      for (const off of unsubscribe) off();
      set.delete(name);
    },
  };
}
