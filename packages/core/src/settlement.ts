import { ErrorCode, isBatchError } from './errors.js';
import { ItemState, type Item, type RunningBatch } from './item.js';
import type { Emitter, StatsRecorder } from './metrics.js';
import type { Refusal } from './refusals.js';
import type { Clock, OverloadCause, RejectReason } from './types.js';

/**
 * The one place an item settles: exactly once, with its listeners and timers cleaned up, counted in the stats and
 * reported by the `reject` event when it did not succeed.
 */
export class Settlement {
  readonly #clock: Clock;
  readonly #stats: StatsRecorder;
  readonly #emitter: Emitter;

  constructor(clock: Clock, stats: StatsRecorder, emitter: Emitter) {
    this.#clock = clock;
    this.#stats = stats;
    this.#emitter = emitter;
  }

  /** A running item's result. */
  succeed(item: Item, value: unknown): void {
    if (item.state !== ItemState.Running) return;
    this.#stats.succeeded += 1;
    if (item.watch === undefined) {
      // The common case, inline: nothing to unsubscribe, no stream, nothing to count.
      item.state = ItemState.Settled;
      (item.batch as NonNullable<Item['batch']>).open -= 1;
      item.resolve?.(value);
      return;
    }
    this.#settle(item, value, undefined, undefined, undefined);
  }

  /**
   * The handler's results for `items` of one batch, one each, in order: an `Error` fails its item, anything else is
   * its value. The caller checked that there are as many results as items.
   */
  results(items: readonly Item[], results: readonly unknown[]): void {
    let resolved = 0;
    for (let index = 0; index < items.length; index += 1) {
      const item = items[index] as Item;
      const result: unknown = results[index];
      if (result instanceof Error) {
        this.fail(item, result);
      } else if (item.watch === undefined && item.state === ItemState.Running) {
        // The common case inline, counted once per batch below: nothing to unsubscribe, no stream.
        item.state = ItemState.Settled;
        resolved += 1;
        item.resolve?.(result);
      } else {
        this.succeed(item, result);
      }
    }
    // Resolving only queues the callers' continuations, so counting after the loop is seen by no one in between.
    if (resolved === 0) return;
    this.#stats.succeeded += resolved;
    ((items[0] as Item).batch as RunningBatch).open -= resolved;
  }

  /** A running item's failure in the handler: thrown, an `Error` result, a bad result, an execution timeout. */
  fail(item: Item, error: unknown): void {
    if (item.state !== ItemState.Running) return;
    this.#stats.failed += 1;
    (item.batch as NonNullable<Item['batch']>).failed += 1;
    this.#settle(item, undefined, error, isBatchError(error) ? error.code : ErrorCode.HANDLER_ERROR, undefined);
  }

  /** An item refused at admission, or taken out of the queue (cancelled, expired, refused early, closed). */
  refuse(item: Item, refusal: Refusal): void {
    this.#settle(item, undefined, refusal.error, refusal.reason, refusal.cause);
  }

  /** Settles `item` once: with `value` when `reason` is `undefined`, else rejected with `error`. */
  #settle(
    item: Item,
    value: unknown,
    error: unknown,
    reason: RejectReason | undefined,
    cause: OverloadCause | undefined,
  ): void {
    const { state } = item;
    if (state === ItemState.Settled) return;
    item.state = ItemState.Settled;
    if (state === ItemState.Running) (item.batch as NonNullable<Item['batch']>).open -= 1;
    const { watch } = item;
    if (watch !== undefined) {
      if (watch.onAbort !== undefined) {
        watch.signal?.removeEventListener('abort', watch.onAbort);
        watch.onAbort = undefined;
      }
      if (watch.timer !== undefined) {
        this.#clock.clearTimeout(watch.timer);
        watch.timer = undefined;
      }
    }
    if (reason !== undefined) this.#count(reason, error, cause);
    const sink = watch?.sink;
    if (sink !== undefined) {
      if (reason === undefined) sink.end();
      else sink.fail(error);
    } else if (reason === undefined) {
      item.resolve?.(value);
    } else {
      item.reject?.(error);
    }
  }

  #count(reason: RejectReason, error: unknown, cause: OverloadCause | undefined): void {
    this.#stats.rejected[reason] += 1;
    if (cause !== undefined) this.#stats.overloaded[cause] += 1;
    if (!this.#emitter.has('reject')) return;
    this.#emitter.emit('reject', cause === undefined ? { reason, error } : { reason, error, cause });
  }
}
