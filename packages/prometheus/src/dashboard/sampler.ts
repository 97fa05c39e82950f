import type { AnyRegistry } from '../options.js';

/** One reading of the registry: counter totals, gauge values and latency histograms, summed over labels. */
interface Sample {
  /** Milliseconds since the epoch. */
  readonly t: number;
  readonly totals: Readonly<Record<CounterKey, number>>;
  readonly gauges: Readonly<Record<GaugeKey, number>>;
  /** Cumulative bucket counts by upper bound (`+Inf` last), per latency histogram. */
  readonly histograms: Readonly<Record<HistogramKey, ReadonlyArray<readonly [number, number]>>>;
}

type CounterKey =
  | 'items'
  | 'batches'
  | 'batchSizeSum'
  | 'batchSizeCount'
  | 'rowsSum'
  | 'rowsCount'
  | 'tokens'
  | 'refusals';
type GaugeKey = 'queue' | 'running' | 'waiting';
type HistogramKey = 'ttft' | 'e2e';

/** Percentiles of a latency over the trailing window, in seconds (`null`: nothing observed in it). */
export interface Percentiles {
  readonly p50: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
}

/** One point of the dashboard's charts: rates over the interval before `t`, gauges at `t`. */
export interface DashboardPoint {
  readonly t: number;
  readonly itemsPerS: number;
  readonly tokensPerS: number;
  /** Mean size of the batches dispatched in the interval (`null`: none). */
  readonly batchSize: number | null;
  /** Mean decode rows per step of a continuous decode loop in the interval, where the registry has that histogram. */
  readonly decodeRows: number | null;
  readonly queue: number;
  readonly running: number;
  readonly refusalsPerS: number;
  readonly ttft: Percentiles;
  readonly e2e: Percentiles;
}

/** Reasons of `rejections_total` that are refusals (the server said no), not failures or cancellations. */
const REFUSAL_REASONS = new Set(['queue_full', 'overloaded', 'deadline', 'closed', 'too_large', 'unavailable']);

interface MetricValue {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number | undefined>>;
  readonly metricName?: string;
}

/**
 * Reads a registry at a fixed interval and keeps the last `points` readings, to turn counters and histograms into
 * rates and windowed percentiles. It reads only what the registry already has: the batchers' `microbatch_*` series
 * and the generation metrics; a series missing from it reads as 0.
 */
export class Sampler {
  readonly #registry: AnyRegistry;
  readonly #prefix: string;
  readonly #capacity: number;
  readonly #windowSamples: number;
  readonly #samples: Sample[] = [];
  #reading: Promise<void> | undefined;

  constructor(registry: AnyRegistry, prefix: string, capacity: number, windowSamples: number) {
    this.#registry = registry;
    this.#prefix = prefix;
    this.#capacity = capacity;
    this.#windowSamples = windowSamples;
  }

  /** Takes a reading (one at a time: a slow registry does not pile readings up). */
  sample(): Promise<void> {
    this.#reading ??= this.#read().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #read(): Promise<void> {
    const metrics = (await this.#registry.getMetricsAsJSON()) as unknown as Array<{
      name: string;
      values: MetricValue[];
    }>;
    const byName = new Map(metrics.map((metric) => [metric.name, metric.values]));
    const p = this.#prefix;
    const sum = (name: string, filter?: (value: MetricValue) => boolean): number => {
      let total = 0;
      for (const value of byName.get(name) ?? []) if (filter === undefined || filter(value)) total += value.value;
      return Number.isFinite(total) ? total : 0;
    };
    const part = (name: string, suffix: string) => (value: MetricValue) => value.metricName === `${name}${suffix}`;
    const histogramPart = (name: string, suffix: string) => sum(name, part(name, suffix));
    const rows = [...byName.keys()].find((name) => name.includes('decode_rows'));
    this.#samples.push({
      t: Date.now(),
      totals: {
        items: sum(`${p}items_total`),
        batches: sum(`${p}batches_total`),
        batchSizeSum: histogramPart(`${p}batch_size`, '_sum'),
        batchSizeCount: histogramPart(`${p}batch_size`, '_count'),
        rowsSum: rows === undefined ? 0 : histogramPart(rows, '_sum'),
        rowsCount: rows === undefined ? 0 : histogramPart(rows, '_count'),
        tokens: sum('microbatch_generation_tokens_total'),
        refusals: sum(`${p}rejections_total`, (value) => REFUSAL_REASONS.has(String(value.labels.reason))),
      },
      gauges: {
        queue: sum(`${p}queue_length`),
        running: sum('microbatch_num_requests_running'),
        waiting: sum('microbatch_num_requests_waiting'),
      },
      histograms: {
        ttft: buckets(byName.get('gen_ai_server_time_to_first_token_seconds')),
        e2e: buckets(byName.get('gen_ai_server_request_duration_seconds')),
      },
    });
    if (this.#samples.length > this.#capacity) this.#samples.shift();
  }

  /** The chart points: one per reading after the first. */
  points(): DashboardPoint[] {
    const samples = this.#samples;
    const points: DashboardPoint[] = [];
    for (let index = 1; index < samples.length; index += 1) {
      const now = samples[index] as Sample;
      const before = samples[index - 1] as Sample;
      const window = samples[Math.max(0, index - this.#windowSamples)] as Sample;
      const seconds = Math.max(0.001, (now.t - before.t) / 1000);
      const delta = (key: CounterKey) => Math.max(0, now.totals[key] - before.totals[key]);
      const mean = (sumKey: CounterKey, countKey: CounterKey) =>
        delta(countKey) > 0 ? delta(sumKey) / delta(countKey) : null;
      points.push({
        t: now.t,
        itemsPerS: delta('items') / seconds,
        tokensPerS: delta('tokens') / seconds,
        batchSize: mean('batchSizeSum', 'batchSizeCount'),
        decodeRows: mean('rowsSum', 'rowsCount'),
        queue: now.gauges.queue + now.gauges.waiting,
        running: now.gauges.running,
        refusalsPerS: delta('refusals') / seconds,
        ttft: percentiles(window.histograms.ttft, now.histograms.ttft),
        e2e: percentiles(window.histograms.e2e, now.histograms.e2e),
      });
    }
    return points;
  }
}

/** A histogram's cumulative counts by bound, summed over its label sets. */
function buckets(values: readonly MetricValue[] | undefined): Array<[number, number]> {
  const counts = new Map<number, number>();
  for (const value of values ?? []) {
    if (value.labels.le === undefined) continue;
    const bound = value.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(value.labels.le);
    counts.set(bound, (counts.get(bound) ?? 0) + value.value);
  }
  return [...counts].sort(([a], [b]) => a - b);
}

/** Percentiles of what was observed between two readings of a histogram (interpolated within a bucket). */
function percentiles(
  before: ReadonlyArray<readonly [number, number]>,
  after: ReadonlyArray<readonly [number, number]>,
): Percentiles {
  const old = new Map(before);
  const counts = after.map(([bound, count]): [number, number] => [bound, count - (old.get(bound) ?? 0)]);
  const total = counts.at(-1)?.[1] ?? 0;
  const at = (q: number): number | null => {
    if (total <= 0) return null;
    const rank = q * total;
    let lower = 0;
    let below = 0;
    for (const [bound, count] of counts) {
      if (count >= rank) {
        // Past the last finite bound: report that bound (the histogram cannot say more).
        if (bound === Number.POSITIVE_INFINITY) return lower;
        return lower + ((bound - lower) * (rank - below)) / Math.max(1e-9, count - below);
      }
      lower = bound;
      below = count;
    }
    return lower;
  };
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99) };
}
