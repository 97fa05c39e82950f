// The Batch API's feeding policy: batch lines use only the capacity that interactive traffic leaves idle. The runner
// asks this gate "may I feed a line now?" (no interactive request running or waiting for `quietMs`, a slot free,
// fewer than `maxInFlight` lines running) and holds a lease for each line it runs; the gate aborts (preempts) every
// held line once an interactive request is running or waiting. On a CPU every row a batch line holds in a
// continuous decode step slows the step for the interactive rows beside it, and a line already decoding would keep
// its row until it ends: a preempted line frees its row at the loop's next step, is not an answer, and is fed again
// once idle. The quiet period keeps lines out of the short gaps between steady interactive requests, where they
// could not finish and would only be preempted (bench:batch: 31 lines fed into every gap were preempted 5,690 times
// in 15 s, finished 29, and tripled interactive p99). After a preemption the lines come back as TCP's slow start
// sends: one, then one more for each that finishes unpreempted, up to `maxInFlight`, so a lull between interactive
// requests is probed by a few lines rather than filled by a burst whose prefill the next request would wait for.
import type { BatcherBase, Clock } from '@microbatch/core';

/** What the gate reads. */
export interface SpareCapacityParts {
  /** The service's batchers, which interactive requests and batch lines share. */
  readonly batchers: readonly BatcherBase[];
  /**
   * The batch lines' items in the batchers now: more handler calls running than these means interactive requests
   * are running.
   */
  readonly batchItemsInFlight: () => number;
  /**
   * Lines running at once, across every batch, on an otherwise idle server: a number, or a function read at each
   * decision (a queue's slots are known only once its workers have announced them).
   */
  readonly maxInFlight: number | (() => number);
  /**
   * How long the server must have been free of interactive work before a line is fed.
   * @default {@link DEFAULT_QUIET_MS}
   */
  readonly quietMs?: number;
  /**
   * How often held lines are checked for an interactive request queued behind them (one dispatched at once is seen
   * when its batch starts).
   * @default 5
   */
  readonly pollMs?: number;
  /** The time (ms, monotonic) and timers of the polls (tests drive them by hand). @default `performance.now`, unref'd timers */
  readonly clock?: GateClock;
}

/** What the gate needs of a clock. */
export type GateClock = Pick<Clock, 'now' | 'setTimeout' | 'clearTimeout'>;

/**
 * The default quiet period: a few lines' time of the bundled model on a CPU, longer than the gaps between steady
 * interactive requests, so lines run in real lulls rather than between two requests.
 */
export const DEFAULT_QUIET_MS = 50;

/** A running line's hold on spare capacity: its signal aborts when it must yield. */
export interface CapacityLease {
  /** Aborts (reason: an `AbortError` naming the preemption) once an interactive request is running or waiting. */
  readonly signal: AbortSignal;
  /** Ends the hold: the line has its answer, or was preempted. */
  release(): void;
}

const realClock: GateClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * The spare-capacity gate of one Batch API: whether a line may be fed, and the preemption of running lines.
 *
 * @example
 * ```ts
 * const gate = new SpareCapacity({ batchers: service.batchers, batchItemsInFlight, maxInFlight: 16 });
 * if (gate.mayFeed(running)) {
 *   const lease = gate.hold();
 *   const answer = await captureAnswer(endpoint, body, lease.signal); // undefined: preempted, feed it again later
 *   lease.release();
 * }
 * ```
 */
export class SpareCapacity {
  readonly #batchers: readonly BatcherBase[];
  readonly #batchItemsInFlight: () => number;
  readonly #maxInFlight: () => number;
  readonly #pollMs: number;
  readonly #quietMs: number;
  readonly #clock: GateClock;
  readonly #held = new Set<AbortController>();
  readonly #unsubscribe: (() => void)[];
  #timer: unknown = undefined;
  #checkQueued = false;
  #preempted = 0;
  #closed = false;
  /** Lines allowed now: 1 after a preemption, one more per line that finished since; unbounded (`maxInFlight` only) otherwise. */
  #window: number;
  /** When interactive work was last seen (never: idle since the start). */
  #lastBusy = Number.NEGATIVE_INFINITY;

  constructor(parts: SpareCapacityParts) {
    const { maxInFlight, pollMs = 5, quietMs = DEFAULT_QUIET_MS } = parts;
    if (typeof maxInFlight !== 'function' && (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1)) {
      throw new TypeError(`maxInFlight must be a positive integer or a function, got ${String(maxInFlight)}`);
    }
    if (!Number.isFinite(pollMs) || pollMs <= 0) {
      throw new TypeError(`pollMs must be a positive number of milliseconds, got ${String(pollMs)}`);
    }
    if (!Number.isFinite(quietMs) || quietMs < 0) {
      throw new TypeError(`quietMs must be a number of milliseconds (0 or more), got ${String(quietMs)}`);
    }
    this.#batchers = parts.batchers;
    this.#batchItemsInFlight = parts.batchItemsInFlight;
    this.#maxInFlight = typeof maxInFlight === 'function' ? maxInFlight : () => maxInFlight;
    this.#window = Number.POSITIVE_INFINITY;
    this.#pollMs = pollMs;
    this.#quietMs = quietMs;
    this.#clock = parts.clock ?? realClock;
    // An interactive request dispatched at once is seen as its batch starts, not a poll later (and starts the quiet
    // period even when no line runs). Checked after the dispatch, not inside it: aborting an item from within the
    // dispatcher's event would re-enter it.
    this.#unsubscribe = parts.batchers.map((batcher) =>
      batcher.on('batchStart', () => {
        if (this.#checkQueued) return;
        this.#checkQueued = true;
        queueMicrotask(() => {
          this.#checkQueued = false;
          this.check();
        });
      }),
    );
  }

  /** Lines running at once on an idle server. */
  get maxInFlight(): number {
    return this.#maxInFlight();
  }

  /** Lines that may run now: 1 after a preemption, growing by one per line finished since, to `maxInFlight`. */
  get window(): number {
    return Math.min(this.#window, this.#maxInFlight());
  }

  /** Lines preempted so far: work done and thrown away, the cost of keeping interactive latency level. */
  get preempted(): number {
    return this.#preempted;
  }

  /**
   * Whether an interactive request is running or waiting: an item queued in any batcher (lines are fed only into
   * free slots, so a queued item is interactive), or more handler calls running than batch lines hold.
   */
  interactive(): boolean {
    let running = 0;
    let busy = false;
    for (const batcher of this.#batchers) {
      if (batcher.queueLength > 0) busy = true;
      running += batcher.inFlightBatches;
    }
    busy ||= running > this.#batchItemsInFlight();
    if (busy) this.#lastBusy = this.#clock.now();
    return busy;
  }

  /**
   * Whether one more line may be fed now, `running` lines being in flight: the server has been idle but for them
   * for the quiet period, and has a free slot.
   */
  mayFeed(running: number): boolean {
    return (
      running < this.window &&
      !this.interactive() &&
      this.#clock.now() - this.#lastBusy >= this.#quietMs &&
      this.#batchers.every(hasRoom)
    );
  }

  /** Holds capacity for one line about to run; its lease's signal aborts when it must yield. */
  hold(): CapacityLease {
    const controller = new AbortController();
    this.#held.add(controller);
    this.#watch();
    return {
      signal: controller.signal,
      release: () => {
        // A line that ended unpreempted widens the window (a preempted one was let go at its preemption).
        if (!this.#held.delete(controller)) return;
        // Back to no bound of its own once it reaches maxInFlight, which may grow later (a queue's workers).
        this.#window = this.#window + 1 >= this.#maxInFlight() ? Number.POSITIVE_INFINITY : this.#window + 1;
      },
    };
  }

  /** Preempts every held line if interactive work is here; how many were preempted. */
  check(): number {
    if (!this.interactive() || this.#held.size === 0) return 0;
    const held = [...this.#held];
    this.#held.clear();
    this.#preempted += held.length;
    this.#window = 1;
    const reason = new DOMException('Preempted by an interactive request', 'AbortError');
    for (const controller of held) controller.abort(reason);
    return held.length;
  }

  /** Stops watching the batchers (the lines held keep their leases). */
  close(): void {
    this.#closed = true;
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Polls while lines are held: a request queued behind them starts no batch to be seen by. */
  #watch(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.check();
      if (this.#held.size > 0) this.#watch();
    }, this.#pollMs);
  }
}

/** Whether `batcher` would dispatch an item now: nothing waiting, a slot free. */
function hasRoom(batcher: BatcherBase): boolean {
  return batcher.queueLength === 0 && batcher.inFlightBatches < batcher.maxConcurrentBatches;
}
