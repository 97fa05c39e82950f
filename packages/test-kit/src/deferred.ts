/** A promise with its resolve/reject exposed, for handlers and gates the test settles by hand. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * A promise the test settles from the outside.
 *
 * @example
 * ```ts
 * const gate = deferred();
 * const handler = async (inputs: number[]) => { await gate.promise; return inputs; };
 * gate.resolve();
 * ```
 */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A promise's outcome as it stands, recorded without letting a rejection go unhandled. */
export interface Settlement<T> {
  readonly state: 'pending' | 'fulfilled' | 'rejected';
  readonly value?: T;
  readonly error?: unknown;
}

/**
 * Records `promise`'s outcome as it settles.
 *
 * @example
 * ```ts
 * const outcome = settleOf(batcher.call(1));
 * await clock.advance(10);
 * expect(outcome.state).toBe('fulfilled');
 * ```
 */
export function settleOf<T>(promise: Promise<T>): Settlement<T> {
  const record: { state: Settlement<T>['state']; value?: T; error?: unknown } = { state: 'pending' };
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
