// The decode loops of continuous text generation in Prometheus: the rows of each step are the real batch sizes
// there (the batcher in front of a loop hands it one request at a time).
import { fail, isObjectLike } from '@microbatch/core/util';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Instrumentation } from './instrument.js';
import { type AnyRegistry, type InstrumentOptions, resolveOptions } from './options.js';

/** What one worker's decode loop reports (`DecodeActivity` of `@microbatch/inference`), as far as metrics need. */
export interface DecodeLoopActivity {
  /** `stepsByRows[r]`: how many steps had `r` rows. */
  readonly stepsByRows: readonly number[];
  readonly tokens: number;
  readonly joined: number;
  readonly left: number;
  /** The reporting worker: the prefix cache's bytes are a level per worker, summed over them. */
  readonly worker?: number;
  /** The prefix cache's window: newcomers looked up, hits, prompt tokens reused, blocks evicted, bytes held now. */
  readonly prefixCacheLookups?: number;
  readonly prefixCacheHits?: number;
  readonly prefixCacheTokens?: number;
  readonly prefixCacheEvictions?: number;
  readonly prefixCacheBytes?: number;
}

/**
 * Where decode loops report their activity: a worker pool of `@microbatch/inference` with continuous scheduling
 * (`pool.onDecodeActivity`), labelled by its `name`.
 *
 * @example
 * ```ts
 * const source: DecodeLoopMetricsSource = pool;
 * ```
 */
export interface DecodeLoopMetricsSource {
  readonly name: string;
  onDecodeActivity(listener: (activity: DecodeLoopActivity) => void): () => void;
}

interface DecodeMetrics {
  readonly rows: Histogram<'name'>;
  readonly tokens: Counter<'name'>;
  readonly joined: Counter<'name'>;
  readonly left: Counter<'name'>;
  readonly cacheLookups: Counter<'name'>;
  readonly cacheHits: Counter<'name'>;
  readonly cacheTokens: Counter<'name'>;
  readonly cacheEvictions: Counter<'name'>;
  readonly cacheBytes: Gauge<'name'>;
}

/** The counters, in the order they are created, reset and removed. */
const COUNTERS = [
  'tokens',
  'joined',
  'left',
  'cacheLookups',
  'cacheHits',
  'cacheTokens',
  'cacheEvictions',
] as const satisfies ReadonlyArray<keyof DecodeMetrics>;

const NAMES = {
  rows: 'decode_rows',
  tokens: 'decode_tokens_total',
  joined: 'decode_joined_total',
  left: 'decode_left_total',
  cacheLookups: 'prefix_cache_lookups_total',
  cacheHits: 'prefix_cache_hits_total',
  cacheTokens: 'prefix_cache_tokens_total',
  cacheEvictions: 'prefix_cache_evictions_total',
  cacheBytes: 'prefix_cache_bytes',
} as const satisfies Record<keyof DecodeMetrics, string>;

const HELP = {
  rows: 'Rows of each decode-loop step: the sequences that got a token in it (the batch size of continuous scheduling).',
  tokens: 'Tokens the decode loops generated.',
  joined: 'Sequences that joined a decode loop (got their first token).',
  left: 'Sequences that left a decode loop (finished or cancelled).',
  cacheLookups: "Newcomers whose prompt was looked up in a decode loop's prefix KV cache.",
  cacheHits: 'Newcomers that reused cached prefix blocks of their prompt.',
  cacheTokens: 'Prompt tokens whose KV came from the prefix cache instead of a prefill.',
  cacheEvictions: 'Prefix-cache blocks evicted (least recently used) to stay within the byte budget.',
  cacheBytes: 'Bytes the prefix KV caches hold, summed over the workers.',
} as const satisfies Record<keyof DecodeMetrics, string>;

/** Metrics shared by every loop instrumented into one registry and prefix, with the names that use them. */
const SETS = new WeakMap<AnyRegistry, Map<string, { metrics: DecodeMetrics; names: Set<string> }>>();

function metricsFor(registry: AnyRegistry, prefix: string, buckets: readonly number[]) {
  let byPrefix = SETS.get(registry);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    SETS.set(registry, byPrefix);
  }
  const existing = byPrefix.get(prefix);
  if (existing !== undefined && registry.getSingleMetric(prefix + NAMES.rows) === existing.metrics.rows) {
    return existing;
  }
  for (const key of Object.keys(NAMES) as Array<keyof DecodeMetrics>) {
    if (registry.getSingleMetric(prefix + NAMES[key]) !== undefined) {
      throw new Error(
        `The registry already has a metric named "${prefix + NAMES[key]}" that @microbatch/prometheus did not create; pass another \`prefix\``,
      );
    }
  }
  const registers = [registry];
  const labelNames = ['name'] as const;
  const counter = (key: keyof DecodeMetrics) =>
    new Counter({ name: prefix + NAMES[key], help: HELP[key], labelNames, registers });
  const metrics: DecodeMetrics = {
    rows: new Histogram({ name: prefix + NAMES.rows, help: HELP.rows, labelNames, buckets: [...buckets], registers }),
    tokens: counter('tokens'),
    joined: counter('joined'),
    left: counter('left'),
    cacheLookups: counter('cacheLookups'),
    cacheHits: counter('cacheHits'),
    cacheTokens: counter('cacheTokens'),
    cacheEvictions: counter('cacheEvictions'),
    cacheBytes: new Gauge({ name: prefix + NAMES.cacheBytes, help: HELP.cacheBytes, labelNames, registers }),
  };
  const created = { metrics, names: new Set<string>() };
  byPrefix.set(prefix, created);
  return created;
}

/**
 * Records the decode loops of a continuous text-generation pool in a prom-client registry, labelled `name` =
 * `source.name`: the histogram `decode_rows` (rows per step, from every step the loops ran; buckets
 * `buckets.batchSize`), the counters `decode_tokens_total`, `decode_joined_total` and `decode_left_total`, and the
 * prefix KV cache's `prefix_cache_lookups_total`, `prefix_cache_hits_total`, `prefix_cache_tokens_total` (prompt
 * tokens reused), `prefix_cache_evictions_total` and the gauge `prefix_cache_bytes` (summed over the workers). Give
 * the batchers in front of the loop `batchSizes: false`: their batches are single requests.
 *
 * @example
 * ```ts
 * instrumentDecodeLoop(model.pool, { registry });
 * for (const batcher of model.batchers) instrumentBatcher(batcher, { registry, batchSizes: false });
 * ```
 */
export function instrumentDecodeLoop(
  source: DecodeLoopMetricsSource,
  options: InstrumentOptions = {},
): Instrumentation {
  const ok = isObjectLike(source) && typeof source.onDecodeActivity === 'function' && typeof source.name === 'string';
  if (!ok) fail('source', 'a worker pool of `@microbatch/inference` (with `onDecodeActivity`)', source);
  const { registry, prefix, buckets } = resolveOptions(options);
  const { name } = source;
  const set = metricsFor(registry, prefix, buckets.batchSize);
  if (set.names.has(name)) {
    throw new TypeError(
      `Expected each decode loop instrumented into one registry to have its own \`name\`, got a second one named ${JSON.stringify(name)}`,
    );
  }
  set.names.add(name);
  const m = set.metrics;
  m.rows.zero({ name });
  for (const key of COUNTERS) m[key].inc({ name }, 0);
  m.cacheBytes.set({ name }, 0);
  /** Each worker's prefix-cache bytes at its last report. */
  const bytesByWorker = new Map<number, number>();
  const off = source.onDecodeActivity((activity) => {
    activity.stepsByRows.forEach((count, rows) => {
      for (let step = 0; step < count; step += 1) m.rows.observe({ name }, rows);
    });
    m.tokens.inc({ name }, activity.tokens);
    m.joined.inc({ name }, activity.joined);
    m.left.inc({ name }, activity.left);
    m.cacheLookups.inc({ name }, activity.prefixCacheLookups ?? 0);
    m.cacheHits.inc({ name }, activity.prefixCacheHits ?? 0);
    m.cacheTokens.inc({ name }, activity.prefixCacheTokens ?? 0);
    m.cacheEvictions.inc({ name }, activity.prefixCacheEvictions ?? 0);
    if (activity.prefixCacheBytes !== undefined) {
      bytesByWorker.set(activity.worker ?? 0, activity.prefixCacheBytes);
      let bytes = 0;
      for (const each of bytesByWorker.values()) bytes += each;
      m.cacheBytes.set({ name }, bytes);
    }
  });
  let active = true;
  return {
    name,
    unregister: () => {
      if (!active) return;
      active = false;
      off();
      set.names.delete(name);
      m.rows.remove({ name });
      for (const key of COUNTERS) m[key].remove({ name });
      m.cacheBytes.remove({ name });
      if (set.names.size > 0) return;
      for (const key of Object.keys(NAMES) as Array<keyof DecodeMetrics>) {
        if (registry.getSingleMetric(prefix + NAMES[key]) === m[key]) registry.removeSingleMetric(prefix + NAMES[key]);
      }
      if (SETS.get(registry)?.get(prefix) === set) SETS.get(registry)?.delete(prefix);
    },
  };
}
