/**
 * The batcher's one `closed` state, and the promise `close()` returns. Owned by the engine, the only caller of
 * {@link close}; admission reads it to refuse arrivals (`CLOSED`), the dispatcher to stop holding batches for their
 * window, and the dispatcher reports when nothing is left to wait for ({@link idle}).
 *
 * @example
 * ```ts
 * const lifecycle = new Lifecycle();
 * const drained = lifecycle.close(); // lifecycle.closed === true
 * lifecycle.idle(); // drained resolves
 * ```
 */
export class Lifecycle {
  #closed = false;
  #drained: Promise<void> | undefined;
  #resolveDrained: (() => void) | undefined;

  get closed(): boolean {
    return this.#closed;
  }

  /** Closes the batcher (idempotent); the promise resolves at the next {@link idle} report. */
  close(): Promise<void> {
    this.#closed = true;
    this.#drained ??= new Promise((resolve) => {
      this.#resolveDrained = resolve;
    });
    return this.#drained;
  }

  /** Nothing is queued and no batch runs: a pending `close()` has drained. */
  idle(): void {
    if (this.#resolveDrained === undefined) return;
    this.#resolveDrained();
    this.#resolveDrained = undefined;
  }
}
