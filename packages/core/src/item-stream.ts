/**
 * One caller's view of a streaming batch: the values produced for its item, in order. Values the caller has not
 * pulled yet are buffered; `return()` (a `break` in `for await`) cancels the item.
 */
export class ItemStream<O> implements AsyncIterableIterator<O> {
  #buffer: O[] = [];
  #head = 0;
  #ended = false;
  #failure: { error: unknown } | undefined;
  #pending: { resolve: (result: IteratorResult<O>) => void; reject: (error: unknown) => void } | undefined;
  #onCancel: (() => void) | undefined;

  /** Called once if the consumer stops before the stream ends. */
  set onCancel(callback: () => void) {
    this.#onCancel = callback;
  }

  /** Whether the stream has ended or failed (nothing more will be delivered). */
  get settled(): boolean {
    return this.#ended || this.#failure !== undefined;
  }

  push(value: O): void {
    if (this.settled) return;
    if (this.#pending !== undefined) {
      const { resolve } = this.#pending;
      this.#pending = undefined;
      resolve({ value, done: false });
      return;
    }
    this.#buffer.push(value);
  }

  end(): void {
    if (this.settled) return;
    this.#ended = true;
    this.#onCancel = undefined;
    if (this.#pending !== undefined && this.#head === this.#buffer.length) {
      const { resolve } = this.#pending;
      this.#pending = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  fail(error: unknown): void {
    if (this.settled) return;
    this.#failure = { error };
    this.#onCancel = undefined;
    if (this.#pending !== undefined) {
      const { reject } = this.#pending;
      this.#pending = undefined;
      this.#failure = undefined;
      this.#ended = true;
      reject(error);
    }
  }

  next(): Promise<IteratorResult<O>> {
    if (this.#head < this.#buffer.length) {
      const value = this.#buffer[this.#head] as O;
      this.#head += 1;
      if (this.#head === this.#buffer.length) {
        this.#buffer = [];
        this.#head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.#failure !== undefined) {
      // The error is delivered once; afterwards the iterator is simply done, like a generator that threw.
      const { error } = this.#failure;
      this.#failure = undefined;
      this.#ended = true;
      return Promise.reject(error);
    }
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    if (this.#pending !== undefined)
      return Promise.reject(new Error('ItemStream does not support concurrent next() calls'));
    return new Promise((resolve, reject) => {
      this.#pending = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<O>> {
    const cancel = this.#onCancel;
    this.#onCancel = undefined;
    this.#buffer = [];
    this.#head = 0;
    this.#failure = undefined;
    if (!this.#ended) {
      this.#ended = true;
      cancel?.();
    }
    if (this.#pending !== undefined) {
      const { resolve } = this.#pending;
      this.#pending = undefined;
      resolve({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(error?: unknown): Promise<IteratorResult<O>> {
    void this.return();
    return Promise.reject(error);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
