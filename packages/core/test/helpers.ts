import type { Clock } from '../src/index.js';

/** A clock the test advances by hand; timers fire in time order, synchronously, inside `advance`. */
export class ManualClock implements Clock {
  #now = 0;
  #nextId = 1;
  readonly #timers = new Map<number, { at: number; callback: () => void }>();

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

  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward, firing due timers in order, and lets promise callbacks run after each. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      let next: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.#timers) if (entry[1].at <= target && (next === undefined || entry[1].at < next[1].at)) next = entry;
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

/** Lets every pending promise callback run (several macrotask turns, so chains of awaits settle). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 5; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** A promise with its resolve/reject exposed, for handlers the test finishes by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Captures a promise's outcome without letting a rejection go unhandled. */
export function settleOf<T>(promise: Promise<T>): { readonly state: 'pending' | 'fulfilled' | 'rejected'; readonly value?: T; readonly error?: unknown } {
  const record: { state: 'pending' | 'fulfilled' | 'rejected'; value?: T; error?: unknown } = { state: 'pending' };
  promise.then(
    (value) => {
      record.state = 'fulfilled';
      record.value = value;
    },
    (error: unknown) => {
      record.state = 'rejected';
      record.error = error;
    },
  );
  return record;
}
