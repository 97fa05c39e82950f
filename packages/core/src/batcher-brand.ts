import { BATCHER_BRAND, type Batcher, type StreamingBatcher } from './types.js';

/**
 * Whether `value` is a batcher: branded with {@link BATCHER_BRAND}, with `call` and a boolean `streaming`.
 *
 * @example
 * ```ts
 * isBatcher(createBatcher(handler)); // true
 * isBatcher(async (x: number) => x); // false
 * ```
 */
export function isBatcher<I = unknown, O = unknown>(value: unknown): value is Batcher<I, O> | StreamingBatcher<I, O> {
  if ((typeof value !== 'function' && typeof value !== 'object') || value === null) return false;
  const candidate = value as { [BATCHER_BRAND]?: unknown; call?: unknown; streaming?: unknown };
  return (
    candidate[BATCHER_BRAND] === true &&
    typeof candidate.call === 'function' &&
    typeof candidate.streaming === 'boolean'
  );
}

/**
 * Internal, not exported from the package: set on the batchers `createBatcher()` makes, whose engine takes any object
 * with `addEventListener`, `removeEventListener`, `aborted` and `reason` as a call's `signal` (it uses nothing else),
 * so `serveBatched` can watch a request without an `AbortController`. Other batchers (transports, wrappers that hand
 * the signal to `AbortSignal.any` or `fetch`) get a real `AbortSignal`. `Symbol.for`: a second copy of core agrees.
 */
export const SIGNAL_LIKE_CALLS: unique symbol = Symbol.for('microbatch.signalLikeCalls');

/** Whether `batcher`'s `call` takes a signal-like object (see {@link SIGNAL_LIKE_CALLS}). */
export function takesSignalLike(batcher: object): boolean {
  return (batcher as { [SIGNAL_LIKE_CALLS]?: unknown })[SIGNAL_LIKE_CALLS] === true;
}
