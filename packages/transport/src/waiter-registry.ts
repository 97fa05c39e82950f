// The items a web replica waits on: registration, deadlines, cancellation and settling, whatever the broker.
import { BatchError, ErrorCode } from '@microbatch/core';
import type { CallOptions, CloseOptions } from '@microbatch/core';
import type { ItemTrace } from './entry-trace.js';
import type { FleetView } from './fleet-load.js';
import type { QueueBatcher, Submission } from './queue-batcher.js';
import type { Waiter } from './replica-replies.js';
import type { WireBatch } from './wire.js';

/** A waiter as the registry keeps it: with its trace and the fairness key it counts under in the fleet view. */
export interface RegisteredWaiter extends Waiter {
  readonly trace: ItemTrace;
  readonly fairnessKey: string | undefined;
}

/**
 * Owns a replica's waiting items: registers each before its broker entry exists (a fast worker may answer before
 * the broker acknowledges it), settles each exactly once (its answer, its deadline, its cancellation, a failure),
 * and keeps the fleet view's own counts and its batcher's tally in step. The broker-specific part, taking a queued
 * entry back out, is the `deleteEntry` hook.
 *
 * @example
 * ```ts
 * const waiters = new WaiterRegistry(fleet, (entryId) => void broker.delete(entryId));
 * const waiter = waiters.register(batcher, item, call, 5000, undefined, trace);
 * ```
 */
export class WaiterRegistry {
  readonly #waiters = new Map<string, RegisteredWaiter>();
  readonly #fleet: FleetView;
  readonly #deleteEntry: (entryId: string) => void;
  #sequence = 0;

  constructor(fleet: FleetView, deleteEntry: (entryId: string) => void) {
    this.#fleet = fleet;
    this.#deleteEntry = deleteEntry;
  }

  /** How many items wait. */
  get size(): number {
    return this.#waiters.size;
  }

  get(itemId: string): RegisteredWaiter | undefined {
    return this.#waiters.get(itemId);
  }

  has(itemId: string): boolean {
    return this.#waiters.has(itemId);
  }

  values(): IterableIterator<RegisteredWaiter> {
    return this.#waiters.values();
  }

  /** Registers one item before its entry exists: a fast worker may answer before the broker acknowledges it. */
  register(
    owner: QueueBatcher,
    item: Submission,
    call: CallOptions,
    timeoutMs: number,
    fairnessKey: string | undefined,
    trace: ItemTrace,
  ): RegisteredWaiter {
    const { signal } = item;
    const itemId = (++this.#sequence).toString(36);
    let timer: NodeJS.Timeout | undefined;
    const onAbort = (): void => this.cancel(waiter, signal?.reason);
    const waiter: RegisteredWaiter = {
      itemId,
      owner,
      entryId: undefined,
      batch: undefined,
      producer: undefined,
      tokensSent: 0,
      onDispatch: call.onDispatch,
      dispatched: false,
      channel: item.channel,
      trace,
      fairnessKey,
      settle: (error, value, batch?: WireBatch) => {
        if (!this.#waiters.delete(itemId)) return;
        trace.sent?.end(error);
        this.#fleet.count(fairnessKey, -1);
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        owner.tally.end(waiter.batch, batch?.executionMs, error !== undefined);
        owner.count(error);
        item.settle(error, value);
      },
    };
    this.#waiters.set(itemId, waiter);
    this.#fleet.count(fairnessKey, 1);
    owner.tally.queued();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (Number.isFinite(timeoutMs)) {
      timer = setTimeout(() => {
        this.cancel(
          waiter,
          new BatchError(ErrorCode.DEADLINE_EXCEEDED, `The item was not answered within ${timeoutMs} ms`),
        );
      }, timeoutMs);
    }
    return waiter;
  }

  cancel(waiter: RegisteredWaiter, reason: unknown): void {
    if (!this.#waiters.has(waiter.itemId)) return;
    waiter.settle(reason);
    // Still queued: no worker will take it. Already running: its answer will be ignored.
    if (waiter.entryId !== undefined) this.#deleteEntry(waiter.entryId);
  }

  failAll(error: BatchError): void {
    for (const waiter of this.#waiters.values()) waiter.settle(error);
  }

  /** Waits until every item of `batcher` settled; `force` cancels them first. */
  async closeBatcher(batcher: QueueBatcher, options: CloseOptions = {}): Promise<void> {
    const mine = () => [...this.#waiters.values()].filter((waiter) => waiter.owner === batcher);
    if (options.force === true) {
      for (const waiter of mine())
        this.cancel(waiter, new BatchError(ErrorCode.CLOSED, `The batcher \`${batcher.name}\` was closed`));
    }
    // Every waiter settles: by its answer, its deadline, its cancellation, or the connection failing.
    while (mine().length > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
