import { BatchError, ErrorCode, completionMs, isFitReady, predictBatchMs } from '@microbatch/core';
import { checkFunction, checkNumber } from '@microbatch/core/util';
import type {
  BatcherBase,
  BatcherEvents,
  BatcherStats,
  CallOptions,
  Capacity,
  FleetLoad,
  StreamingBatcher,
} from '@microbatch/core';

type Cause = 'latency' | 'deadline' | 'fair-share';
type RejectListener = (payload: BatcherEvents['reject']) => void;

/** The largest number of items {@link ReplicaAdmission} considers the fleet could hold within a limit. */
const MAX_CAPACITY_ITEMS = 1 << 20;

// oxlint-disable-next-line require-yield -- it only throws, at the first `next()`.
async function* refused(error: unknown): AsyncIterableIterator<never> {
  throw error;
}

/** The fleet as core's completion rule reads it, and how far its fits stray. */
interface Fleet {
  readonly capacity: Capacity;
  readonly spread: number;
  readonly waiting: number;
  /** Nothing queued and a slot free: an arriving item would start at once. */
  readonly idle: boolean;
}

/**
 * Latency-aware, fair admission for a web replica whose model runs on workers behind a shared queue
 * (`@microbatch/redis`): it refuses at once (`OVERLOADED`, 503 + `Retry-After`) what the FLEET cannot answer within
 * `maxLatencyMs`, by the rule a batcher applies in-process. The workers publish core's latency fit over their
 * batches, their slots and their running batches; the queue reports the items waiting across every replica
 * (`load()`); core's `completionMs` turns them into the predicted completion of an item arriving now, read at the
 * slow end of the fits' error band, exactly as core's predictor does. Until a worker has a trusted fit (5 batches),
 * and whenever an item would start at once, everything is admitted.
 *
 * Fairness across replicas: the fleet's capacity within the limit (the items it can answer in `maxLatencyMs`) is
 * shared by the fairness keys in flight across every replica, with one share kept free for a key not yet there;
 * a key holding its share is refused (`fair-share`). The queue pulls in arrival order, so this share is what keeps
 * a light client's requests within the limit while a heavy one floods another replica. Serving sets the key from
 * the client (its address or `clientKey`), never from OpenAI's `user`, which the client controls.
 *
 * @example
 * ```ts
 * const admission = new ReplicaAdmission(1500, () => queue.load());
 * const guarded = admission.guard(generate);
 * ```
 */
export class ReplicaAdmission {
  readonly #maxLatencyMs: number;
  readonly #load: () => FleetLoad;

  constructor(maxLatencyMs: number, load: () => FleetLoad) {
    checkNumber('maxLatencyMs', maxLatencyMs, 0, Number.POSITIVE_INFINITY, true);
    checkFunction('load', load);
    this.#maxLatencyMs = maxLatencyMs;
    this.#load = load;
  }

  /**
   * The predicted ms until `count` items sent now are answered, at the slow end of the fits' band (what admission
   * compares with the limit); `undefined` while no worker has a trusted fit.
   */
  predictMs(count = 1): number | undefined {
    const fleet = this.#fleet(this.#load());
    if (fleet === undefined) return undefined;
    const items = fleet.waiting + count;
    return completionMs(fleet.capacity, items, items) * (1 + fleet.spread);
  }

  /** How many items the fleet, idle, answers within `limitMs` (at the slow end of the band); `undefined` before a fit. */
  capacityItems(limitMs = this.#maxLatencyMs): number | undefined {
    const fleet = this.#fleet(this.#load());
    return fleet === undefined ? undefined : itemsWithin(fleet, limitMs);
  }

  /** Admits `count` items (of `fairnessKey`, under the call's own limits), or throws `OVERLOADED`. */
  admit(count = 1, options: CallOptions = {}): void {
    const load = this.#load();
    const fleet = this.#fleet(load);
    if (fleet === undefined || fleet.idle) return;
    const limitMs = Math.min(
      this.#maxLatencyMs,
      options.maxLatencyMs ?? Number.POSITIVE_INFINITY,
      options.timeoutMs ?? Number.POSITIVE_INFINITY,
    );
    const cause = limitMs < this.#maxLatencyMs && limitMs === options.timeoutMs ? 'deadline' : 'latency';
    if (options.fairnessKey !== undefined) {
      const { keys } = load;
      const key = String(options.fairnessKey);
      const own = keys.get(key) ?? 0;
      let others = 0;
      for (const [other, inFlight] of keys) if (other !== key && inFlight > 0) others += 1;
      // Every key in flight, this one, and one free share for a key that is not there yet.
      const share = Math.max(1, Math.floor(itemsWithin(fleet, limitMs) / (others + 2)));
      if (own + count > share) {
        const drainMs = completionMs({ ...fleet.capacity, busyMs: 0 }, own + count - share, own + count - share);
        throw overloaded('fair-share', own, share, drainMs);
      }
    }
    const items = fleet.waiting + count;
    const predictedMs = completionMs(fleet.capacity, items, items) * (1 + fleet.spread);
    if (predictedMs > limitMs) throw overloaded(cause, predictedMs, limitMs, predictedMs - limitMs);
  }

  #fleet(load: FleetLoad): Fleet | undefined {
    const fits = load.workers.flatMap((worker) =>
      worker.fit !== undefined && isFitReady(worker.fit) ? [worker.fit] : [],
    );
    if (fits.length === 0) return undefined;
    // The slowest worker's fit: an item may land on any of them.
    const batchMs = (cost: number): number => Math.max(...fits.map((fit) => predictBatchMs(fit, cost)));
    let slots = 0;
    let maxBatchSize = 1;
    let busyMs = 0;
    let running = 0;
    for (const worker of load.workers) {
      slots += worker.concurrency;
      maxBatchSize = Math.max(maxBatchSize, worker.maxBatchSize);
      for (const batch of worker.running) {
        running += 1;
        busyMs += Math.max(0, batchMs(batch.cost) - batch.elapsedMs);
      }
    }
    return {
      capacity: { batchMs, maxBatchSize, slots: Math.max(1, slots), busyMs },
      spread: Math.max(...fits.map((fit) => fit.spread)),
      waiting: load.waiting,
      idle: load.waiting === 0 && running < slots,
    };
  }

  /**
   * `batcher` with this admission in front of `call`, `callAll`, `stream` and `streamAll` (a group is admitted or
   * refused whole). Its refusals are the batcher's as far as anyone can see: `stats()` counts them (`rejected`,
   * `overloaded`) and reports this admission's limit, prediction and fit; `on('reject')` hears them. Everything
   * else (close, the other events) is the batcher's own.
   */
  guard<B extends BatcherBase>(guarded: B): B {
    // Only the methods both kinds share are called on a plain batcher; `stream` is reached on streaming ones only.
    const batcher = guarded as unknown as StreamingBatcher<unknown, unknown>;
    const overloads: Record<Cause, number> = { latency: 0, deadline: 0, 'fair-share': 0 };
    const listeners = new Set<RejectListener>();
    const admit = (count: number, options: CallOptions | undefined): void => {
      try {
        this.admit(count, options);
      } catch (error) {
        const cause = ((error as BatchError).details as { cause: Cause }).cause;
        overloads[cause] += count;
        for (let item = 0; item < count; item += 1) {
          for (const listener of listeners) {
            try {
              listener({ reason: ErrorCode.OVERLOADED, error, cause });
            } catch {
              // A listener's failure must not change the refusal.
            }
          }
        }
        throw error;
      }
    };
    // Refusals come as a rejected promise, or at a stream's first `next()`, as core's batchers give them.
    const call = async (input: unknown, options?: CallOptions): Promise<unknown> => {
      admit(1, options);
      return batcher.call(input, options);
    };
    const callAll = async (inputs: readonly unknown[], options?: CallOptions): Promise<unknown[]> => {
      admit(inputs.length, options);
      return batcher.callAll(inputs, options);
    };
    const stream = (input: unknown, options?: CallOptions): AsyncIterableIterator<unknown> => {
      try {
        admit(1, options);
      } catch (error) {
        return refused(error);
      }
      return batcher.stream(input, options);
    };
    const streamAll = (inputs: readonly unknown[], options?: CallOptions): Array<AsyncIterableIterator<unknown>> => {
      try {
        admit(inputs.length, options);
      } catch (error) {
        return inputs.map(() => refused(error));
      }
      return batcher.streamAll(inputs, options);
    };
    const stats = (): BatcherStats => {
      const base = batcher.stats();
      const refusedHere = overloads.latency + overloads.deadline + overloads['fair-share'];
      const load = this.#load();
      const fleet = this.#fleet(load);
      const fit = load.workers.find((worker) => worker.fit !== undefined && isFitReady(worker.fit))?.fit;
      const items = (fleet?.waiting ?? 0) + 1;
      return {
        ...base,
        rejected: { ...base.rejected, OVERLOADED: base.rejected.OVERLOADED + refusedHere },
        overloaded: {
          latency: base.overloaded.latency + overloads.latency,
          deadline: base.overloaded.deadline + overloads.deadline,
          'fair-share': base.overloaded['fair-share'] + overloads['fair-share'],
        },
        estimate:
          fit === undefined
            ? base.estimate
            : { ready: true, samples: fit.samples, msPerCost: fit.msPerCost, msPerBatch: fit.msPerBatch },
        maxLatencyMs: this.#maxLatencyMs,
        predictedLatencyMs:
          fleet === undefined
            ? Number.NaN
            : fleet.idle
              ? 0
              : completionMs(fleet.capacity, items, items) * (1 + fleet.spread),
      };
    };
    const on = <E extends keyof BatcherEvents>(event: E, listener: (payload: BatcherEvents[E]) => void) => {
      const off = batcher.on(event, listener);
      if (event !== 'reject') return off;
      listeners.add(listener as RejectListener);
      return () => {
        off();
        listeners.delete(listener as RejectListener);
      };
    };
    const own: Record<PropertyKey, unknown> = { call, callAll, stream, streamAll, stats, on };
    return new Proxy(guarded, {
      apply: (_target, _this, args: [unknown, CallOptions?]) => call(...args),
      get: (target, key) => (Object.hasOwn(own, key) ? own[key] : Reflect.get(target, key)),
    });
  }
}

/** The most items an idle fleet answers within `limitMs`, read at the slow end of the band (binary search). */
function itemsWithin(fleet: Fleet, limitMs: number): number {
  const capacity = { ...fleet.capacity, busyMs: 0 };
  const fits = (items: number): boolean => completionMs(capacity, items, items) * (1 + fleet.spread) <= limitMs;
  let low = 0;
  let high = 1;
  while (high < MAX_CAPACITY_ITEMS && fits(high)) {
    low = high;
    high *= 2;
  }
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (fits(middle)) low = middle;
    else high = middle;
  }
  return low;
}

/** `OVERLOADED` as core words it: what was predicted against which limit, and when a retry would fit. */
function overloaded(cause: Cause, predicted: number, limit: number, excessMs: number): BatchError {
  const what =
    cause === 'fair-share'
      ? `this client's share of the fleet is used up (${Math.ceil(predicted)} requests in flight for it, share ${limit})`
      : `the predicted wait of ${Math.ceil(predicted)} ms exceeds ${cause === 'deadline' ? 'the deadline' : 'maxLatencyMs'} (${Math.floor(limit)} ms)`;
  return new BatchError(ErrorCode.OVERLOADED, `The fleet is overloaded: ${what}`, {
    retryAfterSeconds: Math.max(1, Math.ceil((excessMs - 0.001) / 1000)),
    details:
      cause === 'fair-share'
        ? { cause, queued: Math.ceil(predicted), share: limit }
        : { cause, predictedMs: Math.ceil(predicted), limitMs: Math.floor(limit) },
  });
}
