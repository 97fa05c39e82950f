import type { Dispatcher } from './dispatch.js';
import { BatchError, ErrorCode } from './errors.js';
import { type Item, ItemState, type Watch } from './item.js';
import { Refusal } from './refusals.js';
import type { Clock } from './types.js';

/** One options object for every item's abort listener, rather than a literal per call. */
const ONCE = Object.freeze({ once: true });

/**
 * Watches an admitted item's cancellation (its signal, or its stream's consumer stopping) and deadline: queued, the
 * item leaves the queue; running, it settles at once and the batch's signal aborts once no item wants a result.
 * Only items with a {@link Watch} come here, so plain calls allocate none of these closures.
 */
export class ItemWatcher {
  readonly #clock: Clock;
  readonly #dispatcher: Dispatcher;

  constructor(clock: Clock, dispatcher: Dispatcher) {
    this.#clock = clock;
    this.#dispatcher = dispatcher;
  }

  /** Subscribes to the item's cancellation and, if finite, its deadline `timeoutMs` from now. */
  watch(item: Item, watch: Watch, timeoutMs: number): void {
    const { sink, signal } = watch;
    if (sink !== undefined)
      sink.onCancel = () => this.#cancel(item, new DOMException('The stream consumer stopped', 'AbortError'));
    if (signal !== undefined) {
      watch.onAbort = () => this.#cancel(item, signal.reason);
      signal.addEventListener('abort', watch.onAbort, ONCE);
    }
    if (timeoutMs !== Number.POSITIVE_INFINITY) {
      watch.timer = this.#clock.setTimeout(() => this.#expire(item, timeoutMs), timeoutMs);
    }
  }

  /** Called when the caller aborts or stops consuming. */
  #cancel(item: Item, reason: unknown): void {
    this.#leave(item, new Refusal(reason, 'CANCELLED'));
  }

  #expire(item: Item, timeoutMs: number): void {
    (item.watch as Watch).timer = undefined;
    const where = item.state === ItemState.Queued ? 'queued' : 'running';
    const error = new BatchError(ErrorCode.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded while ${where}`);
    this.#leave(item, new Refusal(error, ErrorCode.DEADLINE_EXCEEDED));
  }

  #leave(item: Item, refusal: Refusal): void {
    if (item.state === ItemState.Queued) this.#dispatcher.rejectQueued(item, refusal);
    else if (item.state === ItemState.Running) this.#dispatcher.settleEarly(item, refusal);
  }
}
