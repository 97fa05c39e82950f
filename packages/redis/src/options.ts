import type { BatchTracer } from '@microbatch/core';
import {
  type BrokerWorkerSettings,
  REPLICA_DEFAULTS,
  type ReplicaQueueOptions,
  type StatusListener,
  type StreamResume,
  WORKER_RUN_DEFAULTS,
  type WorkerLogger,
  type WorkerRunOptions,
  checkReplicaOptions,
  checkWorkerHandlers,
  checkWorkerRun,
} from '@microbatch/transport';
import { MAX_FINITE, checkNumber, checkString, definedEntries, fail, isObjectLike } from '@microbatch/core/util';

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
export interface RedisQueueOptions extends RedisQueueTarget, ReplicaQueueOptions {}

/**
 * Options of `createRedisWorker` (the model's side).
 *
 * @example
 * ```ts
 * createRedisWorker({ url, queue: 'tinystories-656k', handlers: { generate: pool.handler }, maxBatchSize: 16 });
 * ```
 */
export interface RedisWorkerOptions<I = unknown, O = unknown, C = unknown>
  extends RedisQueueTarget, WorkerRunOptions<I, O, C> {
  /**
   * Makes streams survive their worker: each chunk's token ids (`tokensOf`) are recorded in Redis with the chunk,
   * and a worker that takes a stream over from one that died runs `withTokens(input, ids sent)`, which must continue
   * the generation after those tokens (as `@microbatch/inference`'s `textGenerationResume` does). The replica sends
   * each token once. Without it, a stream whose worker died is answered 503 after what was sent.
   * @default undefined (streams are not resumed)
   */
  readonly resumable?: StreamResume<I, C>;
  /**
   * An entry delivered to a worker that has not answered it for this long is taken over by another worker (the
   * first worker died). A live worker keeps its running entries fresh, so long batches are not stolen.
   * @default 5000
   */
  readonly claimIdleMs?: number;
  /**
   * How long a reply stream lives after its last reply: what a web replica that died leaves behind expires.
   * @default 60000
   */
  readonly replyTtlMs?: number;
}

export type { StreamResume, WorkerLogger };

export const QUEUE_DEFAULTS = { prefix: 'microbatch', commandTimeoutMs: 1_000, ...REPLICA_DEFAULTS } as const;

export const WORKER_DEFAULTS = {
  prefix: 'microbatch',
  commandTimeoutMs: 1_000,
  ...WORKER_RUN_DEFAULTS,
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
  checkReplicaOptions(resolved);
  return resolved;
}

/** `RedisWorkerOptions` checked, with every default filled in. */
export interface ResolvedWorkerOptions extends BrokerWorkerSettings {
  readonly url: string;
  readonly prefix: string;
  readonly commandTimeoutMs: number;
  readonly claimIdleMs: number;
  readonly heartbeatMs: number;
  readonly replyTtlMs: number;
}

/** Checks the options of `createRedisWorker` once and fills in the defaults. */
export function resolveWorkerOptions<I, O, C>(options: RedisWorkerOptions<I, O, C>): ResolvedWorkerOptions {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = { ...WORKER_DEFAULTS, ...definedEntries('options', options) } as typeof WORKER_DEFAULTS &
    RedisWorkerOptions<I, O, C>;
  checkTarget(resolved);
  checkString('prefix', resolved.prefix);
  checkNumber('commandTimeoutMs', resolved.commandTimeoutMs, 0, MAX_FINITE, true);
  checkWorkerRun(resolved);
  checkNumber('replyTtlMs', resolved.replyTtlMs, 0, MAX_FINITE, true);
  return { ...resolved, ...checkWorkerHandlers(resolved) } as unknown as ResolvedWorkerOptions;
}
