import type { BatcherBase, BatcherEvents } from '@microbatch/core';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { AnyRegistry, MetricBuckets } from './options.js';
import { REASON_LABELS, reasonLabel } from './reasons.js';

type Buckets = Required<MetricBuckets>;

/** The prom-client objects of one set. */
interface Metrics {
  readonly queueWait: Histogram<'name'>;
  readonly execution: Histogram<'name'>;
  readonly batchSize: Histogram<'name'>;
  readonly utilization: Histogram<'name'>;
  readonly queueLength: Gauge<'name'>;
  readonly inFlight: Gauge<'name'>;
  readonly batches: Counter<'name'>;
  readonly items: Counter<'name'>;
  readonly rejections: Counter<'name' | 'reason'>;
  readonly predictedLatency: Gauge<'name'>;
  readonly msPerCost: Gauge<'name'>;
  readonly msPerBatch: Gauge<'name'>;
  readonly overloaded: Counter<'name' | 'cause'>;
}

/** Each metric's name, without the prefix. */
const NAMES = {
  queueWait: 'queue_wait_ms',
  execution: 'batch_execution_ms',
  batchSize: 'batch_size',
  utilization: 'batch_utilization_percent',
  queueLength: 'queue_length',
  inFlight: 'in_flight_batches',
  batches: 'batches_total',
  items: 'items_total',
  rejections: 'rejections_total',
  predictedLatency: 'predicted_latency_ms',
  msPerCost: 'latency_estimate_ms_per_cost',
  msPerBatch: 'latency_estimate_ms_per_batch',
  overloaded: 'overload_refusals_total',
} as const satisfies Record<keyof Metrics, string>;

/** Each metric's `# HELP` text. */
const HELP = {
  queueWait: 'Milliseconds each item waited in the queue before its batch was dispatched.',
  execution: 'Milliseconds each batch handler call ran.',
  batchSize: 'Items in each dispatched batch.',
  utilization: 'Size of each dispatched batch as a percentage of maxBatchSize.',
  queueLength: 'Items waiting to be dispatched.',
  inFlight: 'Batch handler calls running now.',
  batches: 'Batches dispatched to the handler.',
  items: 'Items dispatched to the handler.',
  rejections: 'Items refused, expired, cancelled or failed, by reason.',
  predictedLatency:
    'Predicted milliseconds from now until a new item of cost 1 would have its result (NaN until the estimate is ready).',
  msPerCost: "The latency estimate's handler milliseconds per unit of batch cost.",
  msPerBatch: "The latency estimate's fixed handler milliseconds per batch.",
  overloaded: 'Items refused with OVERLOADED, by cause: latency (maxLatencyMs), deadline, fair_share.',
} as const satisfies Record<keyof Metrics, string>;

const KEYS = Object.keys(NAMES) as Array<keyof Metrics>;

/** The `cause` label of each overload cause; every series starts at 0. */
const CAUSE_LABELS = { latency: 'latency', deadline: 'deadline', 'fair-share': 'fair_share' } as const;

/** A stats field that a batcher from an older core (or a transport) may not have: NaN, which Prometheus shows as such. */
function statOf(
  batcher: BatcherBase,
  read: (stats: Partial<ReturnType<BatcherBase['stats']>>) => number | undefined,
): number {
  if (typeof batcher.stats !== 'function') return Number.NaN;
  try {
    const value = read(batcher.stats());
    return typeof value === 'number' ? value : Number.NaN;
  } catch {
    return Number.NaN; // a scrape must not fail because one batcher's stats did
  }
}

/** One instrumented batcher: what the gauges read, and which `reason` series exist, to remove them later. */
interface Entry {
  readonly batcher: BatcherBase;
  /** Whether its batch sizes are recorded (see `InstrumentOptions.batchSizes`). */
  readonly sizes: boolean;
  readonly reasons: Set<string>;
}

// Keyed by registry object, then prefix: one registry may hold several prefixed sets, and a registry that is
// dropped must not be kept alive by this cache.
const SETS = new WeakMap<AnyRegistry, Map<string, MetricSet>>();

/**
 * The metric objects of one registry and prefix, shared by every batcher instrumented into them and labelled by
 * `name`: prom-client refuses a second metric with the same name, so a second batcher must reuse the first's.
 */
export class MetricSet {
  readonly #registry: AnyRegistry;
  readonly #prefix: string;
  readonly #buckets: Buckets;
  readonly #entries = new Map<string, Entry>();
  readonly #metrics: Metrics;

  /** The set of `registry` and `prefix`, created (and its metrics registered) on first use. */
  static for(registry: AnyRegistry, prefix: string, buckets: Buckets): MetricSet {
    let byPrefix = SETS.get(registry);
    if (byPrefix === undefined) {
      byPrefix = new Map();
      SETS.set(registry, byPrefix);
    }
    const existing = byPrefix.get(prefix);
    if (existing !== undefined && existing.#isRegistered()) {
      existing.#checkBuckets(buckets);
      return existing;
    }
    // Not cached, or the registry was cleared since: start afresh.
    const created = new MetricSet(registry, prefix, buckets);
    byPrefix.set(prefix, created);
    return created;
  }

  private constructor(registry: AnyRegistry, prefix: string, buckets: Buckets) {
    this.#registry = registry;
    this.#prefix = prefix;
    this.#buckets = buckets;
    // Checked up front so a taken name fails before any of our metrics is registered, not halfway through.
    for (const key of KEYS) {
      const name = prefix + NAMES[key];
      if (registry.getSingleMetric(name) !== undefined) {
        throw new Error(
          `The registry already has a metric named "${name}" that @microbatch/prometheus did not create; pass another \`prefix\``,
        );
      }
    }
    const registers = [registry];
    const labelNames = ['name'] as const;
    const histogram = (key: keyof Metrics, bounds: readonly number[]) =>
      new Histogram({ name: prefix + NAMES[key], help: HELP[key], labelNames, buckets: [...bounds], registers });
    // Gauges are read from the batchers at scrape time, so they are current without work on every call.
    const gauge = (key: keyof Metrics, read: (batcher: BatcherBase) => number) =>
      new Gauge({
        name: prefix + NAMES[key],
        help: HELP[key],
        labelNames,
        registers,
        collect: () => {
          const target = this.#metrics[key] as Gauge<'name'>;
          for (const [name, { batcher }] of this.#entries) target.set({ name }, read(batcher));
        },
      });
    const counter = (key: keyof Metrics) =>
      new Counter({ name: prefix + NAMES[key], help: HELP[key], labelNames, registers });
    this.#metrics = {
      queueWait: histogram('queueWait', buckets.queueWaitMs),
      execution: histogram('execution', buckets.executionMs),
      batchSize: histogram('batchSize', buckets.batchSize),
      utilization: histogram('utilization', buckets.utilizationPercent),
      queueLength: gauge('queueLength', (batcher) => batcher.queueLength),
      inFlight: gauge('inFlight', (batcher) => batcher.inFlightBatches),
      batches: counter('batches'),
      items: counter('items'),
      rejections: new Counter({
        name: prefix + NAMES.rejections,
        help: HELP.rejections,
        labelNames: ['name', 'reason'] as const,
        registers,
      }),
      predictedLatency: gauge('predictedLatency', (batcher) => statOf(batcher, (stats) => stats.predictedLatencyMs)),
      msPerCost: gauge('msPerCost', (batcher) => statOf(batcher, (stats) => stats.estimate?.msPerCost)),
      msPerBatch: gauge('msPerBatch', (batcher) => statOf(batcher, (stats) => stats.estimate?.msPerBatch)),
      overloaded: new Counter({
        name: prefix + NAMES.overloaded,
        help: HELP.overloaded,
        labelNames: ['name', 'cause'] as const,
        registers,
      }),
    };
  }

  /** Starts a batcher's series; throws if its name is taken, since two batchers would then share one series. */
  add(batcher: BatcherBase, sizes: boolean): void {
    const { name } = batcher;
    if (this.#entries.has(name)) {
      throw new TypeError(
        'Expected each batcher instrumented into one registry to have its own `name`, ' +
          `got a second batcher named ${JSON.stringify(name)} (prefix ${JSON.stringify(this.#prefix)})`,
      );
    }
    const entry: Entry = { batcher, sizes, reasons: new Set(Object.values(REASON_LABELS)) };
    this.#entries.set(name, entry);
    const m = this.#metrics;
    // Series start at 0 instead of appearing on first use, so `rate()` and absence alerts work from the start.
    m.batches.inc({ name }, 0);
    m.items.inc({ name }, 0);
    for (const reason of entry.reasons) m.rejections.inc({ name, reason }, 0);
    for (const cause of Object.values(CAUSE_LABELS)) m.overloaded.inc({ name, cause }, 0);
    for (const histogram of [m.queueWait, m.execution]) histogram.zero({ name });
    if (sizes) for (const histogram of [m.batchSize, m.utilization]) histogram.zero({ name });
  }

  /** Removes a batcher's series; the last one out unregisters the metrics, leaving the registry as it was. */
  delete(name: string): void {
    const entry = this.#entries.get(name);
    if (entry === undefined) return;
    this.#entries.delete(name);
    const m = this.#metrics;
    for (const histogram of [m.queueWait, m.execution, m.batchSize, m.utilization]) histogram.remove({ name });
    for (const gauge of [m.queueLength, m.inFlight, m.predictedLatency, m.msPerCost, m.msPerBatch])
      gauge.remove({ name });
    for (const cause of Object.values(CAUSE_LABELS)) m.overloaded.remove({ name, cause });
    for (const counter of [m.batches, m.items]) counter.remove({ name });
    for (const reason of entry.reasons) m.rejections.remove({ name, reason });
    if (this.#entries.size > 0) return;
    for (const key of KEYS) {
      const metricName = this.#prefix + NAMES[key];
      // Only our own objects: after `registry.clear()` the name may belong to someone else's metric by now.
      if (this.#registry.getSingleMetric(metricName) === this.#metrics[key])
        this.#registry.removeSingleMetric(metricName);
    }
    const byPrefix = SETS.get(this.#registry);
    if (byPrefix?.get(this.#prefix) === this) byPrefix.delete(this.#prefix);
  }

  batchStart(name: string, { batchSize, maxBatchSize, queueTimesMs }: BatcherEvents['batchStart']): void {
    const m = this.#metrics;
    m.batches.inc({ name });
    // The batcher's own items: the batch size in core; on a Redis web replica a worker's batch also holds other
    // replicas' items, which their own replicas count.
    m.items.inc({ name }, queueTimesMs.length);
    if (this.#entries.get(name)?.sizes === true) {
      m.batchSize.observe({ name }, batchSize);
      m.utilization.observe({ name }, (100 * batchSize) / maxBatchSize);
    }
    for (const ms of queueTimesMs) m.queueWait.observe({ name }, ms);
  }

  batchEnd(name: string, { executionMs }: BatcherEvents['batchEnd']): void {
    this.#metrics.execution.observe({ name }, executionMs);
  }

  reject(name: string, { reason, cause }: BatcherEvents['reject']): void {
    const label = reasonLabel(reason);
    this.#entries.get(name)?.reasons.add(label);
    this.#metrics.rejections.inc({ name, reason: label });
    if (cause !== undefined && Object.hasOwn(CAUSE_LABELS, cause))
      this.#metrics.overloaded.inc({ name, cause: CAUSE_LABELS[cause] });
  }

  #isRegistered(): boolean {
    return KEYS.every((key) => this.#registry.getSingleMetric(this.#prefix + NAMES[key]) === this.#metrics[key]);
  }

  #checkBuckets(buckets: Buckets): void {
    for (const key of Object.keys(buckets) as Array<keyof Buckets>) {
      const mine = this.#buckets[key];
      const theirs = buckets[key];
      if (mine.length !== theirs.length || mine.some((bound, index) => bound !== theirs[index])) {
        throw new TypeError(
          `Expected \`buckets.${key}\` to match the buckets already registered with prefix ${JSON.stringify(this.#prefix)} ` +
            `([${mine.join(', ')}]), got [${theirs.join(', ')}]; use another \`prefix\` or registry for other buckets`,
        );
      }
    }
  }
}
