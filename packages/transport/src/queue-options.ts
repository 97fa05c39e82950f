// The options every transport's replica and worker take (Redis, NATS): their documentation, defaults and checks,
// written once; a transport adds its own (where the queue lives, what its broker needs).
import { DEFAULTS } from '@microbatch/core';
import type { BatchTracer } from '@microbatch/core';
import { MAX_FINITE, checkInteger, checkNumber, checkString, checkTracer, fail } from '@microbatch/core/util';
import type { StatusListener } from './status.js';
import { type WorkerHandlerOptions, checkResumable } from './worker-kit.js';

/**
 * The options of a web replica's queue that are the same on every broker (`createRedisQueue`, `createNatsQueue`).
 *
 * @example
 * ```ts
 * const options: ReplicaQueueOptions = { maxQueueSize: 512, timeoutMs: 20_000, workerGraceMs: 10_000 };
 * ```
 */
export interface ReplicaQueueOptions {
  /**
   * The most entries queued or running across every replica; one more is refused at once with `QUEUE_FULL` (503 +
   * `Retry-After`).
   * @default 1024
   */
  readonly maxQueueSize?: number;
  /**
   * Each item's deadline in ms (a call may lower it). Past it the replica answers `DEADLINE_EXCEEDED` and removes
   * the entry; a worker that reads it later skips it. Keep it below the HTTP server's idle timeout (60 s in
   * `@microbatch/serving`), so a waiting client gets a 504 rather than a closed connection.
   * @default 30000
   */
  readonly timeoutMs?: number;
  /**
   * A worker not heard from for this long counts as gone: with none alive, new items are refused at once with 503
   * `UNAVAILABLE` (as readiness says) and this replica's waiting items are answered the same way after
   * `workerGraceMs`. The replica heartbeats every third of it too; when it stops (killed), workers drop its entries.
   * @default 3000
   */
  readonly heartbeatTtlMs?: number;
  /**
   * How long this replica's waiting items wait for a worker once none is alive (the last one stopped or went silent
   * for `heartbeatTtlMs`): a worker restarted or replaced within it serves them. When it runs out with still no
   * worker, they are answered 503 `UNAVAILABLE`; an item's own deadline ends it first (504). New calls are refused
   * with 503 at once while no worker is alive, grace or not. 0: the waiting items fail as soon as the last worker is
   * gone.
   * @default 5000
   */
  readonly workerGraceMs?: number;
  /**
   * The `Retry-After` hint, in seconds, of `QUEUE_FULL`, `UNAVAILABLE` and `CLOSED` refusals.
   * @default 1
   */
  readonly retryAfterSeconds?: number;
  /**
   * This replica's id, naming its reply stream (Redis) or subject (NATS).
   * @default a random id
   */
  readonly replicaId?: string;
  /** Told once per change when the broker is lost or back, and when no worker is alive or one is again. */
  readonly onStatus?: StatusListener;
  /**
   * Traces each call's time on the queue (`otelTracer()` from `@microbatch/core/otel`: a `microbatch.queue NAME`
   * span under the caller's) and sends its trace context with its entry, for the worker's `tracer`.
   */
  readonly tracer?: BatchTracer;
}

/** The defaults of {@link ReplicaQueueOptions}. */
export const REPLICA_DEFAULTS = {
  maxQueueSize: DEFAULTS.maxQueueSize,
  timeoutMs: 30_000,
  heartbeatTtlMs: 3_000,
  workerGraceMs: 5_000,
  retryAfterSeconds: DEFAULTS.retryAfterSeconds,
} as const;

/**
 * Checks {@link ReplicaQueueOptions} (defaults filled in): a misuse is a `TypeError` naming the option.
 *
 * @example
 * ```ts
 * checkReplicaOptions({ ...REPLICA_DEFAULTS, ...options });
 * ```
 */
export function checkReplicaOptions(
  resolved: ReplicaQueueOptions & { readonly [K in keyof typeof REPLICA_DEFAULTS]: number },
): void {
  checkInteger('maxQueueSize', resolved.maxQueueSize, 1);
  checkNumber('timeoutMs', resolved.timeoutMs, 0, Number.POSITIVE_INFINITY, true);
  checkNumber('heartbeatTtlMs', resolved.heartbeatTtlMs, 0, MAX_FINITE, true);
  checkNumber('workerGraceMs', resolved.workerGraceMs, 0, MAX_FINITE);
  checkNumber('retryAfterSeconds', resolved.retryAfterSeconds, 0, MAX_FINITE);
  if (resolved.replicaId !== undefined) checkString('replicaId', resolved.replicaId);
  if (resolved.onStatus !== undefined && typeof resolved.onStatus !== 'function')
    fail('onStatus', 'a function', resolved.onStatus);
  if (resolved.tracer !== undefined) checkTracer(resolved.tracer);
}

/**
 * The options of a worker that are the same on every broker (`createRedisWorker`, `createNatsWorker`).
 *
 * @example
 * ```ts
 * const options: WorkerRunOptions = { handlers: { generate: pool.handler }, maxBatchSize: 16, concurrency: 2 };
 * ```
 */
export interface WorkerRunOptions<I = unknown, O = unknown, C = unknown> extends WorkerHandlerOptions<I, O, C> {
  /**
   * The most entries one pull takes, and so one handler call receives.
   * @default 8
   */
  readonly maxBatchSize?: number;
  /**
   * How many handler calls may run at once (the worker-thread pool's size). A pull happens only when one is free:
   * entries wait in the queue, where any free worker can take them, instead of in this process.
   * @default 1
   */
  readonly concurrency?: number;
  /**
   * After a pull that found fewer than `maxBatchSize` entries, wait this long and top the batch up with what
   * arrived meanwhile. 0 (work-conserving): a free slot takes what is waiting, at once.
   * @default 0
   */
  readonly batchWaitTimeoutMs?: number;
  /**
   * An entry delivered this many times without an answer (it crashed every worker that took it) is answered with
   * a `HANDLER_ERROR` (500) and taken out of the queue instead of being run again.
   * @default 3
   */
  readonly maxDeliveries?: number;
  /**
   * How often the worker heartbeats (web replicas are ready only while a worker is alive).
   * @default 1000
   */
  readonly heartbeatMs?: number;
  /**
   * Traces each batch (`otelTracer()` from `@microbatch/core/otel`: a `microbatch.batch HANDLER` span linked to the
   * context each entry carried from its replica, the child of it for a batch of one); the handler runs in it.
   */
  readonly tracer?: BatchTracer;
}

/** The defaults of {@link WorkerRunOptions}, and of `claimIdleMs`. */
export const WORKER_RUN_DEFAULTS = {
  maxBatchSize: DEFAULTS.maxBatchSize,
  concurrency: 1,
  batchWaitTimeoutMs: DEFAULTS.batchWaitTimeoutMs,
  claimIdleMs: 5_000,
  maxDeliveries: 3,
  heartbeatMs: 1_000,
} as const;

/**
 * Checks {@link WorkerRunOptions}, `claimIdleMs` and `resumable` (defaults filled in): a misuse is a `TypeError`
 * naming the option. The handlers are checked by `checkWorkerHandlers`.
 *
 * @example
 * ```ts
 * checkWorkerRun({ ...WORKER_RUN_DEFAULTS, ...options });
 * ```
 */
export function checkWorkerRun(
  resolved: { readonly [K in keyof typeof WORKER_RUN_DEFAULTS]: number } & {
    readonly resumable?: unknown;
    readonly tracer?: BatchTracer;
  },
): void {
  checkInteger('maxBatchSize', resolved.maxBatchSize, 1);
  checkInteger('concurrency', resolved.concurrency, 1);
  checkNumber('batchWaitTimeoutMs', resolved.batchWaitTimeoutMs, 0, MAX_FINITE);
  checkNumber('claimIdleMs', resolved.claimIdleMs, 0, MAX_FINITE, true);
  checkInteger('maxDeliveries', resolved.maxDeliveries, 1);
  checkNumber('heartbeatMs', resolved.heartbeatMs, 0, MAX_FINITE, true);
  checkResumable(resolved.resumable);
  if (resolved.tracer !== undefined) checkTracer(resolved.tracer);
}
