// The replica's side of a reply: what any transport does with a worker's reply entry once it has read it.
import { BatchError, ErrorCode, isFitReady } from '@microbatch/core';
import type { DispatchInfo, LatencyFit } from '@microbatch/core';
import type { WorkerSettings } from './batch-tally.js';
import { type ItemTrace, remoteBatch } from './entry-trace.js';
import type { QueueBatcher } from './queue-batcher.js';
import type { ReplyChannel } from './reply-channel.js';
import { type ReplyEntry, ReplyKind, type WireBatch, fromWireError, parseBatch } from './wire.js';

/** One item waiting for its answer on a web replica. */
export interface Waiter {
  readonly itemId: string;
  readonly owner: QueueBatcher;
  /** The broker's id for its entry, once the broker took it. */
  entryId: string | undefined;
  /** The worker batch it started in (announced before the batch runs), if any yet. */
  batch: string | undefined;
  /** The batch id of the worker that streams it (the first to send a chunk; the one that resumed it). */
  producer: string | undefined;
  /** Tokens of a resumable stream sent to the caller so far. */
  tokensSent: number;
  readonly onDispatch: ((info: DispatchInfo) => void) | undefined;
  dispatched: boolean;
  readonly channel: ReplyChannel<unknown> | undefined;
  /** Its trace: the context its entry carries, and the tracer's span for its time on the queue (none untraced). */
  readonly trace?: ItemTrace;
  /** Settles once; `batch` is the answer's batch (its execution time), if a worker answered. */
  settle(error: unknown, value?: unknown, batch?: WireBatch): void;
}

/**
 * Applies one reply entry to its waiting item: a start notice records the batch it runs in, an answer settles it, a
 * chunk goes to its stream. A stream taken over by a second worker after the first sent chunks fails with 503: what
 * was sent cannot be unsent.
 *
 * @example
 * ```ts
 * const waiter = waiters.get(entry.itemId);
 * if (waiter !== undefined) routeReply(waiter, entry, settings.retryAfterSeconds);
 * ```
 */
export function routeReply(waiter: Waiter, entry: ReplyEntry, retryAfterSeconds: number): void {
  const batch = parseBatch(entry.batch);
  started(waiter, batch);
  if (entry.kind === ReplyKind.START) return;
  if (entry.kind === ReplyKind.ERROR) return waiter.settle(fromWireError(entry.data), undefined, batch);
  if (waiter.channel === undefined) {
    if (entry.kind !== ReplyKind.RESULT) return;
    return waiter.settle(undefined, JSON.parse(entry.data), batch);
  }
  if (entry.tokens !== undefined && entry.kind === ReplyKind.CHUNK)
    return resumableChunk(waiter, entry, batch, retryAfterSeconds);
  if (waiter.producer === undefined) {
    waiter.producer = batch.id;
  } else if (waiter.producer !== batch.id && !(entry.kind === ReplyKind.END && waiter.tokensSent > 0)) {
    // (The end of a resumed stream may come from the worker that took it over without a chunk of its own: its
    // predecessor sent the final chunk and died before the end.)
    // A second worker took the item over after the first stopped mid-stream, and cannot resume it (no token ids):
    // what was sent cannot be unsent.
    return waiter.settle(unavailable('The worker streaming this item stopped; retry', retryAfterSeconds));
  }
  if (entry.kind === ReplyKind.CHUNK) waiter.channel.push(JSON.parse(entry.data));
  else if (entry.kind === ReplyKind.END) waiter.settle(undefined, undefined, batch);
}

/**
 * A chunk of a resumable stream: sent on if it starts where the caller is (the worker that resumed a stream starts
 * after the tokens its predecessor's chunks carried), dropped if the caller had it already; a chunk that would leave
 * a gap or overlap part of what was sent fails the stream.
 */
function resumableChunk(waiter: Waiter, entry: ReplyEntry, batch: WireBatch, retryAfterSeconds: number): void {
  const { offset, count } = entry.tokens as { offset: number; count: number };
  if (offset + count <= waiter.tokensSent && count > 0) return; // sent already (a stream started over)
  if (offset !== waiter.tokensSent) {
    return waiter.settle(
      unavailable('The worker streaming this item stopped and it could not be resumed; retry', retryAfterSeconds),
    );
  }
  waiter.producer = batch.id;
  waiter.tokensSent += count;
  waiter.channel?.push(JSON.parse(entry.data));
}

/**
 * Records that an item runs in `batch` (the worker's start notice, or its first answer if that notice was lost),
 * or moved to another worker's batch (taken over), and reports its dispatch once.
 */
export function started(waiter: Waiter, batch: WireBatch): void {
  if (batch.id === '' || waiter.batch === batch.id) return;
  if (waiter.batch === undefined) waiter.owner.tally.start(batch);
  else waiter.owner.tally.move(waiter.batch, batch);
  waiter.batch = batch.id;
  if (waiter.dispatched) return;
  waiter.dispatched = true;
  waiter.trace?.sent?.started(remoteBatch(batch.id, batch.size, batch.queueMs));
  // A global id (`<worker>-<sequence>`): two replicas' items that shared a worker batch show the same one.
  waiter.onDispatch?.({ batchId: batch.id, batchSize: batch.size, queueTimeMs: batch.queueMs, key: undefined });
}

/** A worker's heartbeat JSON; `[]` for one of an older version or not yet announced. */
export function parseWorkerSettings(text: string): WorkerSettings[] {
  try {
    const { maxBatchSize, batchWaitTimeoutMs, concurrency, fit, running, at } = JSON.parse(
      text,
    ) as Partial<WorkerSettings>;
    const values = [maxBatchSize, batchWaitTimeoutMs, concurrency].map(Number);
    if (!values.every(Number.isFinite)) return [];
    const [size, wait, slots] = values as [number, number, number];
    const fitted = isFit(fit) && isFitReady(fit) ? { fit: { ...fit, flatCost: fit.flatCost ?? undefined } } : {};
    const batches = Array.isArray(running)
      ? running.filter((batch) => Number.isFinite(batch?.cost) && Number.isFinite(batch?.elapsedMs))
      : [];
    return [
      {
        maxBatchSize: size,
        batchWaitTimeoutMs: wait,
        concurrency: slots,
        ...fitted,
        running: batches,
        ...(Number.isFinite(at) ? { at } : {}),
      },
    ];
  } catch {
    return [];
  }
}

function isFit(value: unknown): value is LatencyFit {
  if (value === null || typeof value !== 'object') return false;
  const fit = value as Record<string, unknown>;
  return ['samples', 'msPerCost', 'msPerBatch', 'minMs', 'spread'].every((name) => Number.isFinite(fit[name]));
}

/** A 503 `UNAVAILABLE` with its `Retry-After`. */
export function unavailable(message: string, retryAfterSeconds: number, cause?: unknown): BatchError {
  return new BatchError(ErrorCode.UNAVAILABLE, message, {
    retryAfterSeconds,
    ...(cause === undefined ? {} : { cause }),
  });
}

/** A failure's message, for logs and status reports. */
export function describeError(error: unknown, fallback = 'connection lost'): string {
  return error instanceof Error ? error.message : typeof error === 'string' ? error : fallback;
}
