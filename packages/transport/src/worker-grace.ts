// The replica's view of its workers' presence: reports them gone or back once each, and fails the items waiting
// only when no worker has come back within the grace (a worker being replaced should not cost its queue).
import type { BatchError } from '@microbatch/core';
import { type StatusListener, emitStatus } from './status.js';
import type { WaiterRegistry } from './waiter-registry.js';

/** What {@link WorkerGrace} needs from its queue. */
export interface WorkerGraceOptions {
  /** How long waiting items wait for a worker once none is alive; 0 fails them as soon as the last one is gone. */
  readonly graceMs: number;
  readonly queue: string;
  readonly onStatus: StatusListener | undefined;
  /** The queue's waiting items. */
  readonly waiters: WaiterRegistry;
  /** The error the waiting items get when the grace runs out (the broker names itself in it). */
  readonly noWorker: () => BatchError;
  /** The clock, in ms: a test's injected one. @default performance.now */
  readonly now?: () => number;
}

/**
 * Watches how many workers a replica sees alive, sample after sample. The first state seen and each change are
 * reported once (`workers-up`, `workers-down`). Once none is alive, the items waiting keep waiting for
 * `graceMs` (a worker restarted or replaced within it serves them: their entries stay in the broker); when the
 * grace runs out with still no worker, the items waiting then are answered with `noWorker()` (503) and
 * `workers-gone` reports how many. An item's own deadline still ends it first (504), grace or not. New calls are not
 * its business: admission refuses them (503) while no worker is alive, grace or not.
 *
 * @example
 * ```ts
 * const grace = new WorkerGrace({ graceMs: 5_000, queue, onStatus, waiters, noWorker: () => unavailable('…', 1) });
 * grace.observe(alive); // at every sample of the fleet
 * ```
 */
export class WorkerGrace {
  readonly #options: WorkerGraceOptions;
  readonly #now: () => number;
  #alive: boolean | undefined;
  /** When the replica saw the last worker gone; undefined while one is alive or once the grace ran out. */
  #goneAt: number | undefined;

  constructor(options: WorkerGraceOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Whether the replica is in a grace now: no worker alive, and waiting items not failed yet. */
  get inGrace(): boolean {
    return this.#goneAt !== undefined;
  }

  /** Records one sample: `alive` workers seen now. */
  observe(alive: number): void {
    const { queue, onStatus } = this.#options;
    if (alive > 0) {
      this.#goneAt = undefined;
      if (this.#alive !== true) emitStatus(onStatus, { event: 'workers-up', queue, workers: alive });
      this.#alive = true;
      return;
    }
    if (this.#alive !== false) {
      this.#alive = false;
      const { graceMs } = this.#options;
      this.#goneAt = graceMs === 0 ? undefined : this.#now();
      // Without a grace, the items fail now and this one report says how many.
      emitStatus(onStatus, { event: 'workers-down', queue, failed: graceMs === 0 ? this.#failWaiting() : 0 });
      return;
    }
    if (this.#goneAt === undefined || this.#now() - this.#goneAt < this.#options.graceMs) return;
    this.#goneAt = undefined;
    const failed = this.#failWaiting();
    if (failed > 0) emitStatus(onStatus, { event: 'workers-gone', queue, failed, graceMs: this.#options.graceMs });
  }

  /** Fails the items whose entry the broker holds (one being added gets the broker's own verdict). */
  #failWaiting(): number {
    const { waiters, noWorker } = this.#options;
    const waiting = [...waiters.values()].filter((waiter) => waiter.entryId !== undefined);
    for (const waiter of waiting) waiters.cancel(waiter, noWorker());
    return waiting.length;
  }
}
