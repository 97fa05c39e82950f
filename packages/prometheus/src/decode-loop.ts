// The decode loops of continuous text generation in Prometheus: the rows of each step are the real batch sizes
// there (the batcher in front of a loop hands it one request at a time).
import { fail, isObjectLike } from '@microbatch/core/util';
import { Counter, Histogram } from 'prom-client';
import type { Instrumentation } from './instrument.js';
import { type AnyRegistry, type InstrumentOptions, resolveOptions } from './options.js';

/** What one worker's decode loop reports (`DecodeActivity` of `@microbatch/inference`), as far as metrics need. */
export interface DecodeLoopActivity {
  /** `stepsByRows[r]`: how many steps had `r` rows. */
  readonly stepsByRows: readonly number[];
  readonly tokens: number;
  readonly joined: number;
  readonly left: number;
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
}

const NAMES = {
  rows: 'decode_rows',
  tokens: 'decode_tokens_total',
  joined: 'decode_joined_total',
  left: 'decode_left_total',
} as const satisfies Record<keyof DecodeMetrics, string>;

const HELP = {
  rows: 'Rows of each decode-loop step: the sequences that got a token in it (the batch size of continuous scheduling).',
  tokens: 'Tokens the decode loops generated.',
  joined: 'Sequences that joined a decode loop (got their first token).',
  left: 'Sequences that left a decode loop (finished or cancelled).',
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
  };
  const created = { metrics, names: new Set<string>() };
  byPrefix.set(prefix, created);
  return created;
}

/**
 * Records the decode loops of a continuous text-generation pool in a prom-client registry, labelled `name` =
 * `source.name`: the histogram `decode_rows` (rows per step, from every step the loops ran; buckets
 * `buckets.batchSize`) and the counters `decode_tokens_total`, `decode_joined_total` and `decode_left_total`. Give
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
  for (const counter of [m.tokens, m.joined, m.left]) counter.inc({ name }, 0);
  const off = source.onDecodeActivity((activity) => {
    activity.stepsByRows.forEach((count, rows) => {
      for (let step = 0; step < count; step += 1) m.rows.observe({ name }, rows);
    });
    m.tokens.inc({ name }, activity.tokens);
    m.joined.inc({ name }, activity.joined);
    m.left.inc({ name }, activity.left);
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
      for (const counter of [m.tokens, m.joined, m.left]) counter.remove({ name });
      if (set.names.size > 0) return;
      for (const key of Object.keys(NAMES) as Array<keyof DecodeMetrics>) {
        if (registry.getSingleMetric(prefix + NAMES[key]) === m[key]) registry.removeSingleMetric(prefix + NAMES[key]);
      }
      if (SETS.get(registry)?.get(prefix) === set) SETS.get(registry)?.delete(prefix);
    },
  };
}
