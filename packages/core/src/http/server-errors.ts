// One rule for every adapter (Express, Koa, Nest): which errors a server reports to its operator, and how often.
import { toHttpError } from './error-mapping.js';
import { describeValue as describe } from '../util/describe-value.js';

/**
 * Told about every error a route answers with 500: a handler that threw or returned a bad result, or a bug. Load
 * shedding (503 `QUEUE_FULL`, `CLOSED`), deadlines (504) and client errors (4xx) are expected answers, counted by
 * metrics, and not reported. A batch that fails shares one error among its requests: it is reported once.
 *
 * @example
 * ```ts
 * batchRoute({ handler, onError: (error) => logger.error({ err: error }, 'batch failed') });
 * ```
 */
export type ServerErrorListener = (error: unknown) => void;

/**
 * Whether `error` is answered with 500, the one status an adapter reports through its `onError` option.
 *
 * @example
 * ```ts
 * isServerError(new Error('boom')); // true
 * isServerError(new BatchError('QUEUE_FULL', 'full')); // false: 503 is load shedding, not a fault
 * ```
 */
export function isServerError(error: unknown): boolean {
  return toHttpError(error).status === 500;
}

/**
 * Throws the house-style `TypeError` unless `onError` is a function or absent; `caller` names the API it was given to.
 *
 * @example
 * ```ts
 * checkServerErrorListener('batchRoute', 1); // TypeError: Expected `onError` of `batchRoute` to be a function, got `1` (number)
 * ```
 */
export function checkServerErrorListener(
  caller: string,
  onError: unknown,
): asserts onError is ServerErrorListener | undefined {
  if (onError !== undefined && typeof onError !== 'function') {
    throw new TypeError(`Expected \`onError\` of \`${caller}\` to be a function, got ${describe(onError)}`);
  }
}

/**
 * A reporter that passes each server error (see {@link isServerError}) to `listener` once, however many requests
 * it failed, and swallows a throw of the listener itself: a broken logger must not turn into a second failure.
 *
 * @example
 * ```ts
 * const report = serverErrorReporter((error) => console.error(error));
 * report(batchError); report(batchError); // logged once
 * ```
 */
export function serverErrorReporter(listener: ServerErrorListener): (error: unknown) => void {
  // Weak, so reported errors are not kept alive; primitives (a `throw 'oops'`) cannot be remembered and are rare.
  const reported = new WeakSet<object>();
  return (error: unknown): void => {
    if (!isServerError(error)) return;
    if (typeof error === 'object' && error !== null) {
      if (reported.has(error)) return;
      reported.add(error);
    }
    try {
      listener(error);
    } catch {
      // Reporting is best effort; the client already has its answer.
    }
  };
}

/**
 * The reporter for an adapter API's options: their `onError`, checked (the options must be an object), or
 * `fallback`, the framework's own error channel, when none is given.
 *
 * @example
 * ```ts
 * const report = reporterFromOptions('batchRoute', options, (error) => console.error(error));
 * ```
 */
export function reporterFromOptions(
  caller: string,
  options: { readonly onError?: unknown } | undefined,
  fallback: ServerErrorListener,
): (error: unknown) => void {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`${caller}\` options to be an object, got ${describe(options)}`);
  }
  const { onError } = options;
  checkServerErrorListener(caller, onError);
  return serverErrorReporter(onError ?? fallback);
}
