/**
 * The values of one streamed item as they arrive from its reply stream, pulled by the caller's `for await`. Ends
 * with `end()`, fails with `fail()`; `return()` (a `break`) runs `onCancel` once.
 */
export class ReplyChannel<T> implements AsyncIterableIterator<T> {
  readonly #values: T[] = [];
  #waiting: { resolve(step: IteratorResult<T>): void; reject(error: unknown): void } | undefined;
  #done = false;
  #error: { readonly error: unknown } | undefined;
  readonly #onCancel: () => void;

  constructor(onCancel: () => void) {
    this.#onCancel = onCancel;
  }

  get settled(): boolean {
    return this.#done || this.#error !== undefined;
  }

  push(value: T): void {
    if (this.settled) return;
    if (this.#waiting !== undefined) {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      waiting.resolve({ value, done: false });
    } else {
      this.#values.push(value);
    }
  }

  end(): void {
    if (this.settled) return;
    this.#done = true;
    this.#wake();
  }

  fail(error: unknown): void {
    if (this.settled) return;
    this.#error = { error };
    this.#wake();
  }

  #wake(): void {
    const waiting = this.#waiting;
    if (waiting === undefined || this.#values.length > 0) return;
    this.#waiting = undefined;
    if (this.#error !== undefined) waiting.reject(this.#error.error);
    else waiting.resolve({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#values.length > 0) return Promise.resolve({ value: this.#values.shift() as T, done: false });
    if (this.#error !== undefined) {
      const { error } = this.#error;
      // Reported once; afterwards the iterator is simply done.
      this.#error = undefined;
      this.#done = true;
      return Promise.reject(error);
    }
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<T>> {
    if (!this.settled) {
      this.#done = true;
      this.#values.length = 0;
      this.#onCancel();
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
