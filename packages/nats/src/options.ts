import { DEFAULTS } from '@microbatch/core';
import type { BatchTracer } from '@microbatch/core';
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
import {
  type HandlerSettings,
  type StatusListener,
  type StreamResume,
  type WorkerHandlerOptions,
  type WorkerLog,
  checkResumable,
  checkWorkerHandlers,
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
export interface NatsQueueOptions extends NatsQueueTarget {
  /**
   * The most entries queued or running across every replica: the work-queue stream's `max_msgs` (with
   * `discard: new`); one more is refused at once with `QUEUE_FULL` (503 + `Retry-After`). Give every replica the
   * same value: the stream has one bound, the last replica to start sets it.
   * @default 1024
   */
  readonly maxQueueSize?: number;
  /**
   * Each item's deadline in ms (a call may lower it). Past it the replica answers `DEADLINE_EXCEEDED` and deletes
   * the entry; a worker that reads it later skips it. Keep it below the HTTP server's idle timeout (60 s in
   * `@microbatch/serving`), so a waiting client gets a 504 rather than a closed connection.
   * @default 30000
   */
  readonly timeoutMs?: number;
  /**
   * A worker not heard from for this long counts as gone: with none alive, new items are refused at once with 503
   * `UNAVAILABLE` (as readiness says) and this replica's waiting items are answered the same way after `workerGraceMs`.
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
   * This replica's id, naming its reply subject.
   * @default a random id
   */
  readonly replicaId?: string;
  /** Told once per change when NATS is lost or back, and when no worker is alive or one is again. */
  readonly onStatus?: StatusListener;
  /**
   * Traces each call's time on the queue (`otelTracer()` from `@microbatch/core/otel`: a `microbatch.queue NAME`
   * span under the caller's) and sends its trace context with its entry, for the worker's `tracer`.
   */
  readonly tracer?: BatchTracer;
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
  extends NatsQueueTarget, WorkerHandlerOptions<I, O, C> {
  /**
   * The most entries one pull takes, and so one handler call receives.
   * @default 8
   */
  readonly maxBatchSize?: number;
  /**
   * How many handler calls may run at once (the worker-thread pool's size). A pull happens only when one is free:
   * entries wait in the stream, where any free worker can take them, instead of in this process.
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
   * The consumer's `ack_wait`: an entry delivered to a worker that neither answered it nor reported progress for
   * this long is delivered again, to any worker (the first one died). A live worker reports progress on its running
   * entries (`working()`) every third of it, so long batches are not redelivered.
   * @default 5000
   */
  readonly claimIdleMs?: number;
  /**
   * An entry delivered this many times without an answer (it crashed every worker that took it) is answered with
   * a `HANDLER_ERROR` (500) and taken out of the queue instead of being run again.
   * @default 3
   */
  readonly maxDeliveries?: number;
  /**
   * When answers could not be sent (NATS lost mid-batch), the entries are given back (`nak`) to be delivered again
   * after this many ms.
   * @default 1000
   */
  readonly retryDelayMs?: number;
  /**
   * How often the worker announces itself (web replicas are ready only while a worker is alive).
   * @default 1000
   */
  readonly heartbeatMs?: number;
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
  /**
   * Traces each batch (`otelTracer()` from `@microbatch/core/otel`: a `microbatch.batch HANDLER` span linked to the
   * context each entry carried from its replica, the child of it for a batch of one); the handler runs in it.
   */
  readonly tracer?: BatchTracer;
}

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
  retryDelayMs: 1_000,
  heartbeatMs: 1_000,
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
  checkInteger('maxQueueSize', resolved.maxQueueSize, 1);
  checkNumber('timeoutMs', resolved.timeoutMs, 0, Number.POSITIVE_INFINITY, true);
  checkNumber('heartbeatTtlMs', resolved.heartbeatTtlMs, 0, MAX_FINITE, true);
  checkNumber('workerGraceMs', resolved.workerGraceMs, 0, MAX_FINITE);
  checkNumber('retryAfterSeconds', resolved.retryAfterSeconds, 0, MAX_FINITE);
  if (options.replicaId !== undefined) {
    checkString('replicaId', options.replicaId);
    if (!NAME.test(options.replicaId)) fail('replicaId', 'a name of letters, digits, `-` and `_`', options.replicaId);
  }
  if (options.onStatus !== undefined && typeof options.onStatus !== 'function')
    fail('onStatus', 'a function', options.onStatus);
  if (options.tracer !== undefined) checkTracer(options.tracer);
  return { ...resolved, replicaId: options.replicaId, onStatus: options.onStatus, tracer: options.tracer };
}

/** `NatsWorkerOptions` checked, with every default filled in. */
export interface ResolvedWorkerOptions extends HandlerSettings {
  readonly url: string;
  readonly queue: string;
  readonly prefix: string;
  readonly commandTimeoutMs: number;
  readonly maxBatchSize: number;
  readonly concurrency: number;
  readonly batchWaitTimeoutMs: number;
  readonly claimIdleMs: number;
  readonly maxDeliveries: number;
  readonly retryDelayMs: number;
  readonly heartbeatMs: number;
  readonly progressTtlMs: number;
  readonly resumable: StreamResume<unknown, unknown> | undefined;
  readonly workerId: string | undefined;
  readonly log: WorkerLog;
  readonly onStatus: StatusListener | undefined;
  readonly tracer: BatchTracer | undefined;
}

/** Checks the options of `createNatsWorker` once and fills in the defaults. */
export function resolveWorkerOptions<I, O, C>(options: NatsWorkerOptions<I, O, C>): ResolvedWorkerOptions {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = { ...WORKER_DEFAULTS, ...definedEntries('options', options) } as typeof WORKER_DEFAULTS &
    NatsWorkerOptions<I, O, C>;
  checkTarget(resolved);
  checkInteger('maxBatchSize', resolved.maxBatchSize, 1);
  checkInteger('concurrency', resolved.concurrency, 1);
  checkNumber('batchWaitTimeoutMs', resolved.batchWaitTimeoutMs, 0, MAX_FINITE);
  checkNumber('claimIdleMs', resolved.claimIdleMs, 0, MAX_FINITE, true);
  checkInteger('maxDeliveries', resolved.maxDeliveries, 1);
  checkNumber('retryDelayMs', resolved.retryDelayMs, 0, MAX_FINITE);
  checkNumber('heartbeatMs', resolved.heartbeatMs, 0, MAX_FINITE, true);
  if (resolved.workerId !== undefined && !NAME.test(resolved.workerId))
    fail('workerId', 'a name of letters, digits, `-` and `_`', resolved.workerId);
  if (resolved.tracer !== undefined) checkTracer(resolved.tracer);
  checkNumber('progressTtlMs', resolved.progressTtlMs, 0, MAX_FINITE, true);
  checkResumable(resolved.resumable);
  return {
    ...resolved,
    ...checkWorkerHandlers(resolved),
    workerId: resolved.workerId,
    onStatus: resolved.onStatus,
    tracer: resolved.tracer,
    resumable: resolved.resumable,
  };
}
