import type { FleetLoad, FleetWorker } from '@microbatch/core';
import type { WorkerSettings } from './batch-tally.js';

/** One sample of the queue (a replica's probe): what the other replicas and the workers published. */
export interface FleetSample {
  readonly waiting: number;
  /** This replica's own items not yet started when the sample was taken. */
  readonly ownWaiting: number;
  readonly workers: readonly WorkerSettings[];
  /** The other live replicas' items in flight per fairness key. */
  readonly others: ReadonlyMap<string, number>;
  /** The clock of the workers' `at` (the broker's) minus this one's (ms). */
  readonly clockOffsetMs: number;
}

/**
 * A replica's view of the fleet's load: the last sample of the queue, corrected by what this replica itself did
 * since (its own items are counted exactly: waiting, and in flight per fairness key). Other replicas' arrivals
 * since the sample are not seen: samples are taken often (see `createRedisQueue`, `createNatsQueue`) so that stays
 * small. Shared by the transports: each fills a sample from its broker.
 */
export class FleetView {
  #sample: FleetSample = { waiting: 0, ownWaiting: 0, workers: [], others: new Map(), clockOffsetMs: 0 };
  /** This replica's items in flight per fairness key (bounded by its waiters, so by `maxQueueSize`). */
  readonly #own = new Map<string, number>();

  /** Records an item of this replica entering (`+1`) or leaving (`-1`) the queue under `key`. */
  count(key: string | undefined, delta: 1 | -1): void {
    if (key === undefined) return;
    const next = (this.#own.get(key) ?? 0) + delta;
    if (next <= 0) this.#own.delete(key);
    else this.#own.set(key, next);
  }

  /** This replica's items in flight per fairness key, as JSON: what it publishes for the others. */
  published(): string {
    return JSON.stringify(Object.fromEntries(this.#own));
  }

  sampled(sample: FleetSample): void {
    this.#sample = sample;
  }

  /** The fleet's load now; `ownWaiting`: this replica's items not yet started now. */
  load(ownWaiting: number): FleetLoad {
    const sample = this.#sample;
    const brokerNow = Date.now() + sample.clockOffsetMs;
    const workers = sample.workers.map((settings): FleetWorker => {
      const since = settings.at === undefined ? 0 : Math.max(0, brokerNow - settings.at);
      return {
        maxBatchSize: settings.maxBatchSize,
        concurrency: settings.concurrency,
        fit: settings.fit,
        running: (settings.running ?? []).map(({ cost, elapsedMs }) => ({ cost, elapsedMs: elapsedMs + since })),
      };
    });
    const keys = new Map(sample.others);
    for (const [key, count] of this.#own) keys.set(key, (keys.get(key) ?? 0) + count);
    return { waiting: Math.max(0, sample.waiting + ownWaiting - sample.ownWaiting), workers, keys };
  }
}

/** A fairness key as it travels: strings and numbers as text; other values cannot be shared across processes. */
export function fleetKey(key: unknown): string | undefined {
  if (key === undefined) return undefined;
  if (typeof key === 'string') return key;
  if (typeof key === 'number' || typeof key === 'bigint' || typeof key === 'boolean') return String(key);
  throw new TypeError(
    `Expected \`fairnessKey\` to be a string or a number on a shared queue (it travels across processes), got ${typeof key}`,
  );
}

/** The other replicas' published loads, summed per key; a malformed one is skipped. */
export function mergeLoads(texts: readonly string[]): Map<string, number> {
  const merged = new Map<string, number>();
  for (const text of texts) {
    let load: unknown;
    try {
      load = JSON.parse(text);
    } catch {
      continue;
    }
    if (load === null || typeof load !== 'object') continue;
    for (const [key, count] of Object.entries(load)) {
      if (typeof count === 'number' && count > 0) merged.set(key, (merged.get(key) ?? 0) + count);
    }
  }
  return merged;
}
