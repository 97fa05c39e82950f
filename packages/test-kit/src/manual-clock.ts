// Structurally a `Clock` of @microbatch/core (now, setTimeout, clearTimeout), without depending on core: core's own
// tests use this kit.

interface Timer {
  readonly at: number;
  readonly callback: () => void;
}

/**
 * A clock the test advances by hand; timers fire in time order, synchronously, inside `advance`. Pass it as a
 * batcher's `clock` to make waits and deadlines exact.
 *
 * @example
 * ```ts
 * const clock = new ManualClock();
 * const batcher = createBatcher(handler, { batchWaitTimeoutMs: 10, clock });
 * void batcher.call(1);
 * await clock.advance(10); // the batch is dispatched now, not a moment earlier
 * ```
 */
export class ManualClock {
  #now = 0;
  #nextId = 1;
  readonly #timers = new Map<number, Timer>();

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, ms: number): number {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.#now + ms, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** How many timers are set and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward, firing due timers in order, and lets promise callbacks run after each. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      let next: [number, Timer] | undefined;
      for (const entry of this.#timers)
        if (entry[1].at <= target && (next === undefined || entry[1].at < next[1].at)) next = entry;
      if (next === undefined) break;
      this.#timers.delete(next[0]);
      this.#now = next[1].at;
      next[1].callback();
      await flush();
    }
    this.#now = target;
    await flush();
  }
}

/**
 * Lets every pending promise callback run (several macrotask turns, so chains of awaits settle).
 *
 * @example
 * ```ts
 * void batcher.call(1);
 * await flush();
 * expect(handler).toHaveBeenCalledTimes(1);
 * ```
 */
export async function flush(): Promise<void> {
  for (let i = 0; i < 5; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}
