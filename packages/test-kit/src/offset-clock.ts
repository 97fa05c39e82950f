// Structurally a `Clock` of @microbatch/core (now, setTimeout, clearTimeout), without depending on core. Unlike
// `ManualClock`, time runs on by itself: for a server under test (often in a child process) whose short waits must
// stay real (batch windows) while a test reaches one long limit (an execution timeout) by jumping to it, instead of
// racing the machine's speed to it.

interface Timer {
  readonly at: number;
  readonly callback: () => void;
  readonly handle: NodeJS.Timeout;
}

/**
 * The monotonic clock (`performance.now()`) plus the jumps a test makes with {@link OffsetClock.advance}. A timer
 * fires on real time, or at once when a jump reaches it. Time never goes back, so deadlines keep their order. A
 * limit set far beyond a test's run (an hour) fires only when the test jumps past it: exactly then, however slow
 * or loaded the machine, and never on its own in between.
 *
 * @example
 * ```ts
 * const clock = new OffsetClock();
 * const batcher = createBatcher(handler, { batchWaitTimeoutMs: 10, executionTimeoutMs: 3_600_000, clock });
 * // ... once the batch runs (its window of 10 ms passed on real time):
 * clock.advance(3_600_000); // its execution limit passes now, not a moment earlier
 * ```
 */
export class OffsetClock {
  #offset = 0;
  #nextId = 1;
  readonly #timers = new Map<number, Timer>();

  now(): number {
    return performance.now() + this.#offset;
  }

  setTimeout(callback: () => void, ms: number): number {
    const id = this.#nextId++;
    // Not unref'd, as core's system clock: a timer exists only while a server waits for something.
    const handle = setTimeout(() => {
      this.#timers.delete(id);
      callback();
    }, ms);
    this.#timers.set(id, { at: this.now() + ms, callback, handle });
    return id;
  }

  clearTimeout(handle: unknown): void {
    const timer = this.#timers.get(handle as number);
    if (timer === undefined) return;
    clearTimeout(timer.handle);
    this.#timers.delete(handle as number);
  }

  /** How many timers are set and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.#timers.size;
  }

  /**
   * Moves time `ms` forward and fires, synchronously and in time order, the timers the jump reached; returns how
   * many fired. Timers that those callbacks set run on real time from the new `now()` (a callback that re-arms at
   * 0 ms cannot loop here).
   */
  advance(ms: number): number {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new TypeError(`Expected \`ms\` to be a finite number >= 0, got \`${String(ms)}\` (${typeof ms})`);
    }
    this.#offset += ms;
    const now = this.now();
    const due = [...this.#timers].filter(([, timer]) => timer.at <= now).sort((a, b) => a[1].at - b[1].at);
    let fired = 0;
    for (const [id, timer] of due) {
      // Cleared by a callback that fired before it.
      if (!this.#timers.delete(id)) continue;
      clearTimeout(timer.handle);
      timer.callback();
      fired += 1;
    }
    return fired;
  }
}
