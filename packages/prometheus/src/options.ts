import { fail, isObjectLike } from '@microbatch/core/util';
import { type OpenMetricsContentType, type PrometheusContentType, type Registry, register } from 'prom-client';

/** A prom-client registry of either exposition format. */
export type AnyRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

/** Upper bounds of the histogram buckets, each list strictly increasing. */
export interface MetricBuckets {
  /**
   * Per item: milliseconds from the call to its batch's dispatch.
   * @default [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000]
   */
  readonly queueWaitMs?: readonly number[];
  /**
   * Per batch: milliseconds the handler call ran.
   * @default [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000]
   */
  readonly executionMs?: readonly number[];
  /**
   * Per batch: how many items it held; also the buckets of `instrumentDecodeLoop`'s rows per decode step.
   * @default [1, 2, 4, 8, 16, 32, 64, 128, 256]
   */
  readonly batchSize?: readonly number[];
  /**
   * Per batch: its size as a percentage of `maxBatchSize` at dispatch.
   * @default [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
   */
  readonly utilizationPercent?: readonly number[];
}

/** Options of `instrumentBatcher`; checked once, when the batcher is instrumented. */
export interface InstrumentOptions {
  /**
   * Where the metrics are registered; batchers instrumented into one registry share its metrics, labelled by `name`.
   * @default prom-client's global `register`
   */
  readonly registry?: AnyRegistry;
  /**
   * Prepended to every metric name.
   * @default 'microbatch_'
   */
  readonly prefix?: string;
  /**
   * Histogram buckets; omitted lists keep their defaults. Every batcher sharing a registry and prefix must use the
   * same buckets, because one histogram cannot have two bucket layouts.
   * @default DEFAULT_BUCKETS
   */
  readonly buckets?: MetricBuckets;
  /**
   * Whether `batch_size` and `batch_utilization_percent` are recorded for the batcher. Turn it off for a batcher
   * that feeds a continuous decode loop (`@microbatch/inference`): it hands the loop one request at a time, so its
   * batches are 1 by construction and say nothing of the batching; the loop's rows per step are what
   * `instrumentDecodeLoop` records as `decode_rows`.
   * @default true
   */
  readonly batchSizes?: boolean;
}

/**
 * The default histogram buckets. Milliseconds rather than Prometheus' usual seconds, as Ray Serve reports batch
 * timings; queue waits start below the default batch wait of 5 ms, so the first buckets are sub-millisecond.
 *
 * @example
 * ```ts
 * instrumentBatcher(batcher, { buckets: { executionMs: [...DEFAULT_BUCKETS.executionMs, 60_000] } });
 * ```
 */
export const DEFAULT_BUCKETS = Object.freeze({
  queueWaitMs: Object.freeze([0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000]),
  executionMs: Object.freeze([1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000]),
  batchSize: Object.freeze([1, 2, 4, 8, 16, 32, 64, 128, 256]),
  utilizationPercent: Object.freeze([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]),
}) satisfies Required<MetricBuckets>;

/** The library defaults; documented on {@link InstrumentOptions}. */
export const DEFAULT_OPTIONS = {
  registry: register,
  prefix: 'microbatch_',
  buckets: DEFAULT_BUCKETS,
  batchSizes: true,
} as const satisfies Required<InstrumentOptions>;

/** Checks that `value` quacks like a prom-client registry; a plain object here would fail only at scrape time. */
export function checkRegistry(name: string, value: unknown): AnyRegistry {
  const ok =
    isObjectLike(value) &&
    typeof value.metrics === 'function' &&
    typeof value.registerMetric === 'function' &&
    typeof value.getSingleMetric === 'function' &&
    typeof value.removeSingleMetric === 'function' &&
    typeof value.contentType === 'string';
  if (!ok) fail(name, 'a prom-client Registry', value);
  return value as unknown as AnyRegistry;
}

// A prefix must leave a valid metric name (https://prometheus.io/docs/concepts/data_model/); '' is allowed.
const PREFIX = /^(?:[a-zA-Z_:][a-zA-Z0-9_:]*)?$/;

/** The options after defaults are applied and every value is checked. */
export interface ResolvedOptions {
  readonly registry: AnyRegistry;
  readonly prefix: string;
  readonly buckets: Required<MetricBuckets>;
  readonly batchSizes: boolean;
}

/** Applies the defaults to {@link InstrumentOptions} and checks every value. */
export function resolveOptions(options: InstrumentOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const registry =
    options.registry === undefined ? DEFAULT_OPTIONS.registry : checkRegistry('registry', options.registry);
  const prefix = options.prefix ?? DEFAULT_OPTIONS.prefix;
  if (typeof prefix !== 'string') fail('prefix', 'a string', prefix);
  if (!PREFIX.test(prefix)) fail('prefix', 'a metric name prefix matching [a-zA-Z_:][a-zA-Z0-9_:]*', prefix);
  const given: unknown = options.buckets ?? {};
  if (!isObjectLike(given) || Array.isArray(given)) fail('buckets', 'an object', given);
  const buckets = { ...DEFAULT_BUCKETS };
  for (const key of Object.keys(DEFAULT_BUCKETS) as Array<keyof MetricBuckets>) {
    const list = given[key];
    if (list !== undefined) buckets[key] = checkBuckets(`buckets.${key}`, list);
  }
  const batchSizes = options.batchSizes ?? DEFAULT_OPTIONS.batchSizes;
  if (typeof batchSizes !== 'boolean') fail('batchSizes', 'a boolean', batchSizes);
  return { registry, prefix, buckets, batchSizes };
}

function checkBuckets(name: string, value: unknown): readonly number[] {
  const ok =
    Array.isArray(value) &&
    value.length > 0 &&
    value.every(
      (bound: unknown, index) =>
        typeof bound === 'number' && Number.isFinite(bound) && (index === 0 || bound > (value[index - 1] as number)),
    );
  if (!ok) fail(name, 'a non-empty, strictly increasing array of finite numbers', value);
  return Object.freeze([...(value as number[])]);
}
