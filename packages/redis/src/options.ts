import { DEFAULTS } from '@microbatch/core';
import type { BatchHandler, BatchTracer, StreamingBatchHandler } from '@microbatch/core';
import type { StatusListener, StreamResume, WorkerLogger } from '@microbatch/transport';
import { checkResumable, checkWorkerHandlers } from '@microbatch/transport';
import {
  MAX_FINITE,
  checkInteger,
  checkTracer,
  checkNumber,
  checkString,
  definedEntries,
  fail,
  isObjectLike,
} from '@microbatch/core/util';

/** Where a queue lives: what web replicas and workers must agree on. */
export interface RedisQueueTarget {
  /** The Redis server, `redis://[user:password@]host:port[/db]`. */
  readonly url: string;
  /** The queue's name, usually the model's (every replica and worker of one model uses the same). */
  readonly queue: string;
  /**
   * The prefix of every key the queue uses.
   * @default 'microbatch'
   */
  readonly prefix?: string;
  /**
   * How long a Redis command may take before it counts as failed (the connection is then treated as down).
   * @default 1000
   */
  readonly commandTimeoutMs?: number;
}

/**
 * Options of `createRedisQueue` (the web replica's side).
 *
 * @example
 * ```ts
 * const options: RedisQueueOptions = { url: 'redis://127.0.0.1:6379', queue: 'tinystories-656k', maxQueueSize: 512 };
 * ```
 */
export interface RedisQueueOptions extends RedisQueueTarget {
  /**
   * The most entries queued or running in the queue across every replica; one more is refused at once with
   * `QUEUE_FULL` (503 + `Retry-After`).
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
   * A worker whose last heartbeat is older than this counts as gone: with none alive, new items are refused at once
   * with 503 `UNAVAILABLE` (as readiness says) and this replica's waiting items are answered the same way after
   * `workerGraceMs`. The replica heartbeats every third of it too; when it stops (killed), workers drop its entries
   * within this time.
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
   * This replica's id, naming its reply stream.
   * @default a random id
   */
  readonly replicaId?: string;
  /** Told once per change when Redis is lost or back, and when no worker is alive or one is again. */
  readonly onStatus?: StatusListener;
  /**
   * Traces each call's time on the queue (`otelTracer()` from `@microbatch/core/otel`: a `microbatch.queue NAME`
   * span under the caller's) and sends its trace context with its entry, for the worker's `tracer`.
   */
  readonly tracer?: BatchTracer;
}

/**
 * Options of `createRedisWorker` (the model's side).
 *
 * @example
 * ```ts
 * createRedisWorker({ url, queue: 'tinystories-656k', handlers: { generate: pool.handler }, maxBatchSize: 16 });
 * ```
 */
export interface RedisWorkerOptions<I = unknown, O = unknown, C = unknown> extends RedisQueueTarget {
  /** The batch handlers by name: a replica's `queue.batcher(name)` reaches `handlers[name]`. */
  readonly handlers?: Readonly<Record<string, BatchHandler<I, O>>>;
  /** The streaming batch handlers by name: a replica's `queue.streamingBatcher(name)` reaches them. */
  readonly streamingHandlers?: Readonly<Record<string, StreamingBatchHandler<I, C>>>;
  /**
   * Makes streams survive their worker: each chunk's token ids (`tokensOf`) are recorded in Redis with the chunk,
   * and a worker that takes a stream over from one that died runs `withTokens(input, ids sent)`, which must continue
   * the generation after those tokens (as `@microbatch/inference`'s `textGenerationResume` does). The replica sends
   * each token once. Without it, a stream whose worker died is answered 503 after what was sent.
   * @default undefined (streams are not resumed)
   */
  readonly resumable?: StreamResume<I, C>;
  /**
   * Partitions a pulled batch: only inputs with equal keys share a handler call.
   * @default () => undefined
   */
  readonly batchKey?: (input: I) => unknown;
  /**
   * The most entries one pull takes, and so one handler call receives.
   * @default 8
   */
  readonly maxBatchSize?: number;
  /**
   * How many handler calls may run at once (the worker-thread pool's size). A pull happens only when one is free:
   * entries wait in Redis, where any free worker can take them, instead of in this process.
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
   * An entry delivered to a worker that has not answered it for this long is taken over by another worker (the
   * first worker died). A live worker keeps its running entries fresh, so long batches are not stolen.
   * @default 5000
   */
  readonly claimIdleMs?: number;
  /**
   * An entry delivered this many times without an answer (it crashed every worker that took it) is answered with
   * a `HANDLER_ERROR` instead of being run again.
   * @default 3
   */
  readonly maxDeliveries?: number;
  /**
   * How often the worker heartbeats (web replicas are ready only while a worker is alive) and looks for entries to
   * take over.
   * @default 1000
   */
  readonly heartbeatMs?: number;
  /**
   * How long a reply stream lives after its last reply: what a web replica that died leaves behind expires.
   * @default 60000
   */
  readonly replyTtlMs?: number;
  /**
   * The worker's id, the first half of its global batch ids (`<id>-<sequence>`).
   * @default a random id
   */
  readonly workerId?: string;
  /**
   * Where one line per batch, and failures, are reported: a line printer, or a pino-compatible logger (pino,
   * Fastify's `app.log`) that gets the facts as fields (`{ worker, batchId, handler, batchSize, replicas,
   * queueWaitMs, maxQueueWaitMs, executionMs, failed }`, "batch"); `false` turns it off.
   * @default console.log
   */
  readonly log?: ((line: string) => void) | WorkerLogger | false;
  /** Told once per change when Redis is lost or back (also logged through `log`). */
  readonly onStatus?: StatusListener;
  /**
   * Traces each batch (`otelTracer()` from `@microbatch/core/otel`: a `microbatch.batch HANDLER` span linked to the
   * context each entry carried from its replica, the child of it for a batch of one); the handler runs in it.
   */
  readonly tracer?: BatchTracer;
}

export type { StreamResume, WorkerLogger };

export const QUEUE_DEFAULTS = {
  prefix: 'microbatch',
  commandTimeoutMs: 1_000,
  maxQueueSize: DEFAULTS.maxQueueSize,
  timeoutMs: 30_000,
  heartbeatTtlMs: 3_000,
  workerGraceMs: 5_000,
  retryAfterSeconds: DEFAULTS.retryAfterSeconds,
} as const;

export const WORKER_DEFAULTS = {
  prefix: 'microbatch',
  commandTimeoutMs: 1_000,
  maxBatchSize: DEFAULTS.maxBatchSize,
  concurrency: 1,
  batchWaitTimeoutMs: DEFAULTS.batchWaitTimeoutMs,
  claimIdleMs: 5_000,
  maxDeliveries: 3,
  heartbeatMs: 1_000,
  replyTtlMs: 60_000,
} as const;

function checkTarget(options: RedisQueueTarget): void {
  const url = checkString('url', options.url);
  if (!/^rediss?:\/\//.test(url)) fail('url', 'a redis:// or rediss:// URL', url);
  checkString('queue', options.queue);
  if (/[\s{}]/.test(options.queue)) fail('queue', 'a name without spaces or braces', options.queue);
}

/** Checks the options of `createRedisQueue` once and fills in the defaults. */
export function resolveQueueOptions(options: RedisQueueOptions): Required<
  Omit<RedisQueueOptions, 'replicaId' | 'onStatus' | 'tracer'>
> & {
  replicaId?: string;
  onStatus?: StatusListener;
  tracer?: BatchTracer;
} {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = { ...QUEUE_DEFAULTS, ...definedEntries('options', options) } as Required<RedisQueueOptions>;
  checkTarget(resolved);
  checkString('prefix', resolved.prefix);
  checkNumber('commandTimeoutMs', resolved.commandTimeoutMs, 0, MAX_FINITE, true);
  checkInteger('maxQueueSize', resolved.maxQueueSize, 1);
  checkNumber('timeoutMs', resolved.timeoutMs, 0, Number.POSITIVE_INFINITY, true);
  checkNumber('heartbeatTtlMs', resolved.heartbeatTtlMs, 0, MAX_FINITE, true);
  checkNumber('workerGraceMs', resolved.workerGraceMs, 0, MAX_FINITE);
  checkNumber('retryAfterSeconds', resolved.retryAfterSeconds, 0, MAX_FINITE);
  if (options.replicaId !== undefined) checkString('replicaId', options.replicaId);
  if (options.onStatus !== undefined && typeof options.onStatus !== 'function')
    fail('onStatus', 'a function', options.onStatus);
  if (options.tracer !== undefined) checkTracer(options.tracer);
  return resolved;
}

/** `RedisWorkerOptions` checked, with every default filled in. */
export interface ResolvedWorkerOptions {
  readonly url: string;
  readonly queue: string;
  readonly prefix: string;
  readonly commandTimeoutMs: number;
  readonly maxBatchSize: number;
  readonly concurrency: number;
  readonly batchWaitTimeoutMs: number;
  readonly claimIdleMs: number;
  readonly maxDeliveries: number;
  readonly heartbeatMs: number;
  readonly replyTtlMs: number;
  readonly handlers: Readonly<Record<string, BatchHandler<unknown, unknown>>>;
  readonly streamingHandlers: Readonly<Record<string, StreamingBatchHandler<unknown, unknown>>>;
  readonly batchKey: ((input: unknown) => unknown) | undefined;
  readonly resumable: StreamResume<unknown, unknown> | undefined;
  readonly workerId: string | undefined;
  readonly log: ((line: string) => void) | WorkerLogger | false;
  readonly onStatus: StatusListener | undefined;
  readonly tracer: BatchTracer | undefined;
}

/** Checks the options of `createRedisWorker` once and fills in the defaults. */
export function resolveWorkerOptions<I, O, C>(options: RedisWorkerOptions<I, O, C>): ResolvedWorkerOptions {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = { ...WORKER_DEFAULTS, ...definedEntries('options', options) } as typeof WORKER_DEFAULTS &
    RedisWorkerOptions<I, O, C>;
  checkTarget(resolved);
  checkString('prefix', resolved.prefix);
  checkNumber('commandTimeoutMs', resolved.commandTimeoutMs, 0, MAX_FINITE, true);
  checkInteger('maxBatchSize', resolved.maxBatchSize, 1);
  checkInteger('concurrency', resolved.concurrency, 1);
  checkNumber('batchWaitTimeoutMs', resolved.batchWaitTimeoutMs, 0, MAX_FINITE);
  checkNumber('claimIdleMs', resolved.claimIdleMs, 0, MAX_FINITE, true);
  checkInteger('maxDeliveries', resolved.maxDeliveries, 1);
  checkNumber('heartbeatMs', resolved.heartbeatMs, 0, MAX_FINITE, true);
  checkNumber('replyTtlMs', resolved.replyTtlMs, 0, MAX_FINITE, true);
  checkResumable(resolved.resumable);
  if (resolved.tracer !== undefined) checkTracer(resolved.tracer);
  return { ...resolved, ...checkWorkerHandlers(resolved) } as unknown as ResolvedWorkerOptions;
}
