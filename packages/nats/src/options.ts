import type { BatchTracer } from '@microbatch/core';
import { MAX_FINITE, checkNumber, checkString, definedEntries, fail, isObjectLike } from '@microbatch/core/util';
import {
  type BrokerWorkerSettings,
  REPLICA_DEFAULTS,
  type ReplicaQueueOptions,
  type StatusListener,
  type StreamResume,
  WORKER_RUN_DEFAULTS,
  type WorkerRunOptions,
  checkReplicaOptions,
  checkWorkerHandlers,
  checkWorkerRun,
} from '@microbatch/transport';
import { MAX_STREAM_NAME, queueNames } from './names.js';

/** Where a queue lives: what web replicas and workers must agree on. */
export interface NatsQueueTarget {
  /** The NATS server with JetStream enabled (`nats-server -js`), `nats://[user:password@]host:port`. */
  readonly url: string;
  /**
   * The queue's name, usually the model's: any text whose streams' names fit JetStream's 255 characters (it names
   * a stream and subjects through an injective encoding, `encodeQueueName`: letters, digits and `-` as they are,
   * `_` as `__`, any other byte as `_` and two hex digits). A longer one is a `TypeError` here.
   */
  readonly queue: string;
  /**
   * The prefix of the queue's stream (`<prefix>_<queue>`) and subjects (`<prefix>.<queue>.…`): letters, digits and
   * `-`.
   * @default 'microbatch'
   */
  readonly prefix?: string;
  /**
   * How long a JetStream request (publish acknowledgement, stream and consumer set-up) may take before it fails.
   * @default 1000
   */
  readonly commandTimeoutMs?: number;
}

/**
 * Options of `createNatsQueue` (the web replica's side).
 *
 * @example
 * ```ts
 * const options: NatsQueueOptions = { url: 'nats://127.0.0.1:4222', queue: 'tinystories-656k', maxQueueSize: 512 };
 * ```
 */
export interface NatsQueueOptions extends NatsQueueTarget, ReplicaQueueOptions {
  /**
   * The most entries queued or running across every replica: the work-queue stream's `max_msgs` (with
   * `discard: new`); one more is refused at once with `QUEUE_FULL` (503 + `Retry-After`). Give every replica the
   * same value: the stream has one bound, the last replica to start sets it.
   * @default 1024
   */
  readonly maxQueueSize?: number;
}

/**
 * Options of `createNatsWorker` (the model's side).
 *
 * @example
 * ```ts
 * createNatsWorker({ url, queue: 'tinystories-656k', handlers: { generate: pool.handler }, maxBatchSize: 16 });
 * ```
 */
export interface NatsWorkerOptions<I = unknown, O = unknown, C = unknown>
  extends NatsQueueTarget, WorkerRunOptions<I, O, C> {
  /**
   * The consumer's `ack_wait`: an entry delivered to a worker that neither answered it nor reported progress for
   * this long is delivered again, to any worker (the first one died). A live worker reports progress on its running
   * entries (`working()`) every third of it, so long batches are not redelivered.
   * @default 5000
   */
  readonly claimIdleMs?: number;
  /**
   * When answers could not be sent (NATS lost mid-batch), the entries are given back (`nak`) to be delivered again
   * after this many ms.
   * @default 1000
   */
  readonly retryDelayMs?: number;
  /**
   * Lets a stream survive its worker: each chunk's token ids (`tokensOf`) go to the queue's progress stream before
   * the chunk goes to its replica, and a worker taking the entry over (its first worker died) runs it with the
   * tokens already sent (`withTokens`), so the caller's stream goes on with no token twice. Without it, such a
   * stream fails with 503. `textGenerationResume` from `@microbatch/inference` for continuous decoding.
   */
  readonly resumable?: StreamResume<I, C>;
  /**
   * How long an entry's stream progress is kept when its worker died and nobody finished it (a finished one's is
   * deleted at once).
   * @default 600000
   */
  readonly progressTtlMs?: number;
}

export const QUEUE_DEFAULTS = { prefix: 'microbatch', commandTimeoutMs: 1_000, ...REPLICA_DEFAULTS } as const;

export const WORKER_DEFAULTS = {
  prefix: 'microbatch',
  commandTimeoutMs: 1_000,
  ...WORKER_RUN_DEFAULTS,
  retryDelayMs: 1_000,
  progressTtlMs: 600_000,
} as const;

const NAME = /^[A-Za-z0-9_-]+$/;
const PREFIX = /^[A-Za-z0-9-]+$/;

/**
 * Checks a queue's name (and prefix) as `createNatsQueue` and `createNatsWorker` do: a non-empty string whose
 * streams' names, encoded (`encodeQueueName`), fit JetStream's 255 characters; throws a `TypeError` naming the
 * option otherwise. For a process to refuse a name before it loads a model.
 *
 * @example
 * ```ts
 * checkQueueName('tinystories-656k'); // fine
 * checkQueueName('x'.repeat(300)); // TypeError: … would be 320 characters …
 * ```
 */
export function checkQueueName(queue: unknown, prefix: unknown = QUEUE_DEFAULTS.prefix): void {
  checkString('queue', queue);
  checkString('prefix', prefix);
  // No `_` in a prefix: `<prefix>_<encoded queue>` must say where the queue's name starts.
  if (!PREFIX.test(prefix as string)) fail('prefix', 'a name of letters, digits and `-`', prefix);
  // Refused here rather than by JetStream at every try to set the queue up (never ready, nothing said).
  const longest = queueNames(prefix as string, queue as string).progressStream;
  if (longest.length > MAX_STREAM_NAME)
    throw new TypeError(
      `Expected \`queue\` to be a name whose NATS streams fit JetStream's ${MAX_STREAM_NAME} characters: ` +
        `\`<prefix>_<queue>_progress\` would be ${longest.length} characters (${(queue as string).length} in the ` +
        `queue's name; a character other than a letter, a digit or \`-\` takes 2 or more)`,
    );
}

function checkTarget(options: NatsQueueTarget): void {
  const url = checkString('url', options.url);
  if (!/^(nats|tls):\/\/[^\s]+$/.test(url)) fail('url', 'a nats:// or tls:// URL', url);
  checkQueueName(options.queue, options.prefix);
  checkNumber('commandTimeoutMs', options.commandTimeoutMs, 0, MAX_FINITE, true);
}

export type ResolvedQueueOptions = Required<Omit<NatsQueueOptions, 'replicaId' | 'onStatus' | 'tracer'>> & {
  readonly replicaId: string | undefined;
  readonly onStatus: StatusListener | undefined;
  readonly tracer: BatchTracer | undefined;
};

/** Checks the options of `createNatsQueue` once and fills in the defaults. */
export function resolveQueueOptions(options: NatsQueueOptions): ResolvedQueueOptions {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = { ...QUEUE_DEFAULTS, ...definedEntries('options', options) } as Required<NatsQueueOptions>;
  checkTarget(resolved);
  checkReplicaOptions(resolved);
  if (options.replicaId !== undefined && !NAME.test(options.replicaId))
    fail('replicaId', 'a name of letters, digits, `-` and `_`', options.replicaId);
  return { ...resolved, replicaId: options.replicaId, onStatus: options.onStatus, tracer: options.tracer };
}

/** `NatsWorkerOptions` checked, with every default filled in. */
export interface ResolvedWorkerOptions extends BrokerWorkerSettings {
  readonly url: string;
  readonly prefix: string;
  readonly commandTimeoutMs: number;
  readonly claimIdleMs: number;
  readonly retryDelayMs: number;
  readonly heartbeatMs: number;
  readonly progressTtlMs: number;
}

/** Checks the options of `createNatsWorker` once and fills in the defaults. */
export function resolveWorkerOptions<I, O, C>(options: NatsWorkerOptions<I, O, C>): ResolvedWorkerOptions {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = { ...WORKER_DEFAULTS, ...definedEntries('options', options) } as typeof WORKER_DEFAULTS &
    NatsWorkerOptions<I, O, C>;
  checkTarget(resolved);
  checkWorkerRun(resolved);
  checkNumber('retryDelayMs', resolved.retryDelayMs, 0, MAX_FINITE);
  if (resolved.workerId !== undefined && !NAME.test(resolved.workerId))
    fail('workerId', 'a name of letters, digits, `-` and `_`', resolved.workerId);
  checkNumber('progressTtlMs', resolved.progressTtlMs, 0, MAX_FINITE, true);
  return {
    ...resolved,
    ...checkWorkerHandlers(resolved),
    workerId: resolved.workerId,
    onStatus: resolved.onStatus,
    tracer: resolved.tracer,
    resumable: resolved.resumable,
  };
}
