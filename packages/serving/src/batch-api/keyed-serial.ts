// One writer at a time per key: a batch's record is read, changed and written back by the runner's steps (a
// periodic save, a cancel, finalization), and two of them interleaved would write back a stale copy.

/**
 * Runs the writes given for one key one after another, in the order asked; writes of different keys run at once.
 *
 * @example
 * ```ts
 * const writes = new KeyedSerial();
 * await writes.run('batch_abc', () => batches.save(next));
 * ```
 */
export class KeyedSerial {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `write` once every write of `key` asked for before it has settled; its result. */
  run<T>(key: string, write: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const next = previous.then(write, write);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, settled);
    // Forgotten once settled with nothing after it: one entry per key being written, not per key ever written.
    void settled.then(() => {
      if (this.#tails.get(key) === settled) this.#tails.delete(key);
    });
    return next;
  }
}
