/**
 * A one-consumer async queue: the worker's step messages are pushed as they arrive and pulled by the streaming
 * handler. Pushes never wait, so a slow consumer only delays its own stream, never the worker.
 */
export class StepChannel<T> implements AsyncIterableIterator<T> {
  #buffer: T[] = [];
  #done = false;
  #failure: { readonly error: unknown } | undefined;
  #waiting: { resolve: (result: IteratorResult<T>) => void; reject: (error: unknown) => void } | undefined;

  push(value: T): void {
    if (this.#done) return;
    if (this.#waiting !== undefined) {
      const { resolve } = this.#waiting;
      this.#waiting = undefined;
      resolve({ value, done: false });
    } else {
      this.#buffer.push(value);
    }
  }

  /** Ends the channel after the buffered values. */
  end(): void {
    if (this.#done) return;
    this.#done = true;
    this.#flush();
  }

  /** Fails the channel after the buffered values. */
  fail(error: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#failure = { error };
    this.#flush();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#buffer.length > 0) return Promise.resolve({ value: this.#buffer.shift() as T, done: false });
    if (this.#failure !== undefined) {
      const { error } = this.#failure;
      this.#failure = undefined;
      return Promise.reject(error);
    }
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject };
    });
  }

  /** Stops consuming: later pushes are dropped. */
  return(): Promise<IteratorResult<T>> {
    this.#done = true;
    this.#buffer = [];
    this.#failure = undefined;
    this.#flush();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  #flush(): void {
    if (this.#waiting === undefined || this.#buffer.length > 0) return;
    const { resolve, reject } = this.#waiting;
    this.#waiting = undefined;
    if (this.#failure !== undefined) {
      const { error } = this.#failure;
      this.#failure = undefined;
      reject(error);
    } else {
      resolve({ value: undefined, done: true });
    }
  }
}
